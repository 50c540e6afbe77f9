import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { NOTICED_LAG_MS, NOTICED_REFRESH_AHEAD_MS, OTHER_PROCESS_LAG_MS } from '../../storage/write-clock.ts';
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
 * Postgres reads its counters by a query, which every request needing them would wait for. Its
 * trigger notifies listening instances as a change commits: while those notices come, values are
 * kept until one comes (or NOTICED_LAG_MS at most), and read again in the background from
 * NOTICED_REFRESH_AHEAD_MS; with the LISTEN connection gone, the 20 ms rule holds. The clock is
 * stopped (only Date is faked) so the ages are exact; what moves the values then is a notice.
 */
describe.skipIf(!DIALECTS.includes('postgres'))('change counters heard of (postgres)', () => {
  let t: TestKernel;
  const counter = () => t.kernel.storage.changeCounter('identity');
  const outside = (statement: string) => writeOutsideThePlatform(t.kernel.storage.description, statement);
  const later = (ms: number) => vi.setSystemTime(Date.now() + ms);
  /** A fresh read, then whether its values are still at hand past the 20 ms rule (only notices heard keep them that long). */
  const readAndKeptPastTheLag = async () => {
    later(NOTICED_LAG_MS); // whatever is held is past every lag: the next call reads
    const read = await counter();
    later(OTHER_PROCESS_LAG_MS + 5);
    const kept = counter();
    return { read, kept: typeof kept === 'number' };
  };
  /** Until a read is kept past the 20 ms rule (the LISTEN starts with the first read; a write of the kernel's own background work makes a read stale). */
  const heardRead = async () => {
    for (let attempt = 0; attempt < 100; attempt += 1) {
      const { read, kept } = await readAndKeptPastTheLag();
      if (kept) return read;
      await sleep(20); // real time
    }
    throw new Error('no read was kept past the 20 ms rule');
  };

  beforeAll(async () => {
    // No background work of its own meanwhile: a write of this process would make the values stale too.
    t = await startTestKernel({ dialect: 'postgres', env: { WORKER_POLL_MS: '600000', EVENTS_POLL_MS: '600000' } });
    vi.useFakeTimers({ toFake: ['Date'] });
  });
  afterAll(async () => {
    vi.useRealTimers();
    await t?.stop();
  });

  it('see a change another process commits as its notice arrives, with no time passing', async () => {
    const held = await heardRead();
    later(NOTICED_REFRESH_AHEAD_MS - 200);
    expect(counter()).toBe(held);
    await outside("update organizations set name = 'Renamed, and heard of' where id = 1");
    let seen = held;
    for (let i = 0; i < 100 && seen === held; i += 1) {
      await sleep(10); // real time: Date stands still, so only the notice can make the values stale
      seen = await counter();
    }
    expect(seen).toBeGreaterThan(held);
  });

  it('read ahead of need from NOTICED_REFRESH_AHEAD_MS, and make a caller wait past NOTICED_LAG_MS', async () => {
    await heardRead();
    later(NOTICED_REFRESH_AHEAD_MS - OTHER_PROCESS_LAG_MS - 5);
    expect(typeof counter()).toBe('number'); // still the read before, not aging yet
    later(OTHER_PROCESS_LAG_MS + 5);
    expect(typeof counter()).toBe('number'); // aging: answered, and a read started
    await sleep(200); // real time: the read ahead is back
    later(NOTICED_LAG_MS - NOTICED_REFRESH_AHEAD_MS + 50);
    expect(typeof counter()).toBe('number'); // past the first read's lag, within the new one's
    later(NOTICED_LAG_MS);
    expect(counter()).toBeInstanceOf(Promise);
  });

  it('keep the 20 ms rule while the LISTEN connection is gone, and hear notices again once it is back', async () => {
    await heardRead();
    await outside("select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and query ilike 'listen %'");
    await sleep(100); // real time: the listener sees its connection end
    const { kept } = await readAndKeptPastTheLag();
    expect(kept).toBe(false);
    await heardRead(); // reconnected (after about a second), notices are heard again
  });
});
