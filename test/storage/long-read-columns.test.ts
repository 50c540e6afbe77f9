import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueryTimeoutError } from '../../storage/index.ts';
import type { Storage } from '../../storage/types.ts';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

/** A statement that computes for many seconds on both databases. */
const SLOW = 'with recursive c(n) as (select 1 union all select n + 1 from c where n < 50000000) select count(*) as n from c';

describe.each(DIALECTS)('long reads by column (%s)', (dialect) => {
  let t: TestKernel;
  let storage: Storage;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    storage = t.kernel.storage as Storage;
  });
  afterAll(async () => t?.stop());

  it('answers each column as one array, rows in order, values as the database reads them', async () => {
    const query = sql`select n, cast(n as double precision) * 1.5 as half, 'row ' || n as label, null as absent from (select 1 as n union all select 2 union all select 3) as numbers order by n`.compile(storage.db);
    const block = await storage.longReadColumns(1, query);
    expect(block).toEqual({ columns: ['n', 'half', 'label', 'absent'], values: [[1, 2, 3], [1.5, 3, 4.5], ['row 1', 'row 2', 'row 3'], [null, null, null]], rows: 3 });
  });

  it('binds parameters and answers no rows with the columns still named', async () => {
    const query = sql`select ${"it's -- not a comment"} as quoted, 1 as one where 1 = ${2}`.compile(storage.db);
    expect(await storage.longReadColumns(1, query)).toEqual({ columns: ['quoted', 'one'], values: [[], []], rows: 0 });
    const echoed = sql`select ${"it's /* not */ a comment"} as quoted`.compile(storage.db);
    expect((await storage.longReadColumns(1, echoed)).values).toEqual([["it's /* not */ a comment"]]);
  });

  it('stops a statement past its timeout with a QueryTimeoutError', async () => {
    const started = Date.now();
    await expect(storage.longReadColumns(1, sql.raw(SLOW).compile(storage.db), { timeoutMs: 300 })).rejects.toBeInstanceOf(QueryTimeoutError);
    expect(Date.now() - started).toBeLessThan(20_000);
    // The connection or worker it used serves the next read.
    expect((await storage.longReadColumns(1, sql`select 7 as seven`.compile(storage.db))).values).toEqual([[7]]);
  });
});
