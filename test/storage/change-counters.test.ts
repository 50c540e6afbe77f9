import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { OTHER_PROCESS_LAG_MS, REFRESH_AHEAD_MS } from '../../storage/write-clock.ts';
import { DIALECTS, startTestKernel, writeOutsideThePlatform, type TestKernel } from '../harness/index.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Change counters as every cache of the request path reads them (`Storage.changeCounter`): kept in
 * memory, read again after any write of this process, and at most OTHER_PROCESS_LAG_MS old
 * otherwise, the same on both adapters.
 */
describe.each(DIALECTS)('change counters (%s)', (dialect) => {
  let t: TestKernel;
  const counter = () => t.kernel.storage.changeCounter('identity');
  const rename = (name: string) => t.kernel.storage.db.updateTable('organizations').set({ name }).where('id', '=', 1).execute();

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
  });
  afterAll(() => t?.stop());

  it('count a write of this process at once, autocommitted or at the commit of its transaction', async () => {
    const before = await counter();
    await rename('Counted at once');
    const afterWrite = await counter();
    expect(afterWrite).toBeGreaterThan(before);
    await t.kernel.storage.transaction(async (trx) => {
      await trx.updateTable('organizations').set({ name: 'Counted at commit' }).where('id', '=', 1).execute();
    });
    expect(await counter()).toBeGreaterThan(afterWrite);
  });

  it('answer from memory between writes: a read right after another asks no query', async () => {
    await counter();
    // The two reads are microseconds apart; a pause of the whole process (GC, a busy machine) past the lag makes one read again.
    let atHand = false;
    for (let attempt = 0; attempt < 5 && !atHand; attempt += 1) {
      await counter();
      atHand = typeof counter() === 'number';
    }
    expect(atHand).toBe(true);
  });

  it('count a write by another process within the lag', async () => {
    const before = await counter();
    await writeOutsideThePlatform(t.kernel.storage.description, "update organizations set name = 'Renamed by a console' where id = 1");
    await sleep(OTHER_PROCESS_LAG_MS * 2);
    expect(await counter()).toBeGreaterThan(before);
  });
});

/**
 * Postgres reads its counters by a query, which every request needing them would wait for: past
 * REFRESH_AHEAD_MS the values held keep answering while they are read again in the background, and
 * past OTHER_PROCESS_LAG_MS a caller waits for a new read as before. The clock is stopped (only
 * Date is faked) so the ages are exact.
 */
describe.skipIf(!DIALECTS.includes('postgres'))('change counters read ahead of need (postgres)', () => {
  let t: TestKernel;
  const counter = () => t.kernel.storage.changeCounter('identity');

  beforeAll(async () => {
    t = await startTestKernel({ dialect: 'postgres' });
  });
  afterAll(async () => {
    vi.useRealTimers();
    await t?.stop();
  });

  it('answer from the values held while a read ahead of need runs, then from its values; past the lag, wait for a read', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    // A write of this process (the kernel's own background work) between the read and the check
    // makes the values stale at once, rightly: the scenario is tried again then.
    let held: number | undefined;
    for (let attempt = 0; attempt < 5 && held === undefined; attempt += 1) {
      vi.setSystemTime(Date.now() + OTHER_PROCESS_LAG_MS); // whatever is held is past the lag: the next call reads
      const read = await counter();
      const readAt = Date.now();
      await writeOutsideThePlatform(t.kernel.storage.description, `update organizations set name = 'Read ahead of need ${attempt}' where id = 1`);
      vi.setSystemTime(readAt + REFRESH_AHEAD_MS);
      const atHand = counter(); // and a read started
      if (typeof atHand === 'number') {
        expect(atHand).toBe(read);
        held = read;
      }
    }
    expect(held).toBeDefined();
    let seen: number | Promise<number> = held!;
    for (let i = 0; i < 200 && seen === held; i += 1) {
      await sleep(10); // real time: only Date is faked
      seen = counter();
    }
    expect(typeof seen).toBe('number');
    expect(seen).toBeGreaterThan(held!);

    vi.setSystemTime(Date.now() + OTHER_PROCESS_LAG_MS);
    const waited = counter();
    expect(waited).toBeInstanceOf(Promise);
    expect(await waited).toBeGreaterThanOrEqual(seen as number);
  });
});

