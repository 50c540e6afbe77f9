import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OTHER_PROCESS_LAG_MS } from '../../storage/write-clock.ts';
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
