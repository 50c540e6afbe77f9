import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueryRejectedError, QueryTimeoutError, SelectRefusedError, type DataColumn, type GovernedDataset, type GovernedWrite } from '../../storage/index.ts';
import type { Storage } from '../../storage/types.ts';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

/** A statement that computes for many seconds on both databases, answering one integer. */
const SLOW = 'with recursive c(n) as (select 1 union all select n + 1 from c where n < 50000000) select count(*) as n from c';

describe.each(DIALECTS)('governed writes and descriptions (%s)', (dialect) => {
  let t: TestKernel;
  let storage: Storage;
  const orgId = 1;
  let orders: GovernedDataset;
  let outsiderOrg: number;
  let secretsTable: string;
  let targets = 0;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    storage = t.kernel.storage as Storage;
    const project = await t.request('POST', '/api/projects', { body: { key: 'GW', name: 'Governed writes' } });
    const columns = [
      { name: 'id', type: 'integer' },
      { name: 'amount', type: 'number' },
      { name: 'country', type: 'string' },
      { name: 'email', type: 'string', pii: true },
      { name: 'flag', type: 'boolean' },
      { name: 'day', type: 'date' },
    ] as const;
    const created = await t.request('POST', '/api/datasets', { body: { name: 'orders', project_id: project.body.id, columns } });
    expect(created.status).toBe(201);
    const csv = 'id,amount,country,email,flag,day\n1,10.5,FR,a@example.test,true,2024-01-05\n2,20,DE,b@example.test,false,2024-02-01\n3,5,FR,c@example.test,true,2024-03-09\n';
    expect((await t.request('POST', `/api/datasets/${created.body.id}/data`, { body: csv, headers: { 'content-type': 'text/csv' } })).status).toBe(200);
    orders = { name: 'orders', table: `ds_${created.body.id}`, columns: columns.map((c) => ({ name: c.name, type: c.type, masked: false })), rowFilter: null };

    const other = await t.outsider('gw-outsider');
    outsiderOrg = other.orgId;
    const theirProject = await t.request('POST', '/api/projects', { token: other.token, body: { key: 'THEIRS', name: 'Theirs' } });
    const secret = await t.request('POST', '/api/datasets', { token: other.token, body: { name: 'secrets', project_id: theirProject.body.id, columns: [{ name: 'v', type: 'string' }] } });
    await t.request('POST', `/api/datasets/${secret.body.id}/rows`, { token: other.token, body: [{ v: 'top secret' }] });
    secretsTable = `ds_${secret.body.id}`;
  });
  afterAll(async () => t?.stop());

  /** A new, empty target table of the organization with these columns. */
  async function target(columns: DataColumn[]): Promise<string> {
    const name = `ds_gw_target_${(targets += 1)}`;
    await storage.dataTables.create(storage.db, orgId, name, columns);
    return name;
  }

  /** The target's rows, in its column order, decoded as the platform reads them. */
  async function rowsOf(name: string, columns: DataColumn[]): Promise<unknown[][]> {
    const names = sql.join(columns.map((c) => sql.id(c.name)));
    const { rows } = await sql<Record<string, unknown>>`select ${names} from ${storage.dataTables.ref(orgId, name)} order by 1`.execute(storage.db);
    return rows.map((row) => columns.map((c) => storage.dataTables.decode(c.type, row[c.name])));
  }

  const write = (statement: string, into: string, columns: DataColumn[], more: Partial<GovernedWrite> = {}) =>
    storage.writeGoverned({ sql: statement, params: [], orgId, datasets: [orders], mask: '***', timeoutMs: 20_000, target: into, columns, ...more });

  /** As callers do: the statement checked by the adapter's parser first, then written. */
  const parsedWrite = async (statement: string, into: string, columns: DataColumn[]) => write((await storage.parseGovernedSelect(statement)).sql, into, columns);

  it('writes a grouped result into a typed target, converting each value to its column type', async () => {
    const columns: DataColumn[] = [
      { name: 'country', type: 'string' },
      { name: 'n', type: 'integer' },
      { name: 'total', type: 'number' },
      { name: 'many', type: 'boolean' },
    ];
    const into = await target(columns);
    const written = await parsedWrite('select country, count(*) as n, sum(amount) as total, count(*) > 1 as many from orders group by country', into, columns);
    expect(written).toEqual({ rows: 2 });
    expect(await rowsOf(into, columns)).toEqual([
      ['DE', 1, 20, false],
      ['FR', 2, 15.5, true],
    ]);
  });

  it('writes a result of many chunks (SQLite copies it 25 000 rows per transaction) whole and in order', async () => {
    const columns: DataColumn[] = [
      { name: 'n', type: 'integer' },
      { name: 'label', type: 'string' },
    ];
    const into = await target(columns);
    const numbers = `with recursive c(n) as (select 1 union all select n + 1 from c where n < 60001) select n, 'row ' || n as label from c, orders where orders.id = 1`;
    expect(await write(numbers, into, columns)).toEqual({ rows: 60_001 });
    const table = storage.dataTables.ref(orgId, into);
    const { rows } = await sql<{ n: number; first: number; last: number; ordered: number }>`select count(*) as n, min(n) as first, max(n) as last, sum(case when n = ${sql.id('_row_id')} then 1 else 0 end) as ordered from ${table}`.execute(storage.db);
    expect(rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, Number(v)])))).toEqual([{ n: 60_001, first: 1, last: 60_001, ordered: 60_001 }]);
  });

  it('takes result columns by position: duplicated names and parameters work', async () => {
    const columns: DataColumn[] = [
      { name: 'a', type: 'integer' },
      { name: 'b', type: 'string' },
    ];
    const into = await target(columns);
    expect(await write('select id as x, country as x from orders where amount > $1', into, columns, { params: [6] })).toEqual({ rows: 2 });
    expect(await rowsOf(into, columns)).toEqual([
      [1, 'FR'],
      [2, 'DE'],
    ]);
  });

  it("refuses another organization's dataset and physical table names; the target stays empty", async () => {
    const columns: DataColumn[] = [{ name: 'v', type: 'string' }];
    const into = await target(columns);
    // Straight to the database: the organization's role (Postgres) or the program check (SQLite) refuses it.
    const theirs = dialect === 'postgres' ? `select v from "org_${outsiderOrg}"."${secretsTable}"` : `select v from "org_${outsiderOrg}__${secretsTable}"`;
    await expect(write(theirs, into, columns)).rejects.toBeInstanceOf(QueryRejectedError);
    await expect(write(`select v from secrets`, into, columns)).rejects.toBeInstanceOf(QueryRejectedError);
    // The organization's own tables by their physical names: the parser or the database refuses them.
    for (const physical of [`select country from org_${orgId}__${orders.table}`, `select country from "org_${orgId}"."${orders.table}"`]) {
      await expect(parsedWrite(physical, into, columns)).rejects.toSatisfy((err) => err instanceof SelectRefusedError || err instanceof QueryRejectedError);
    }
    if (dialect === 'sqlite') await expect(write(`select country from "org_${orgId}__${orders.table}"`, into, columns, { datasets: [] })).rejects.toBeInstanceOf(QueryRejectedError);
    expect(await rowsOf(into, columns)).toEqual([]);
  });

  it('writes a masked column as the mask and applies row filters, as governed reads do', async () => {
    const columns: DataColumn[] = [
      { name: 'id', type: 'integer' },
      { name: 'email', type: 'string' },
    ];
    const into = await target(columns);
    const governed: GovernedDataset = { ...orders, columns: orders.columns.map((c) => ({ ...c, masked: c.name === 'email' })), rowFilter: `"country" = 'FR'` };
    expect(await write('select id, email from orders', into, columns, { datasets: [governed] })).toEqual({ rows: 2 });
    expect(await rowsOf(into, columns)).toEqual([
      [1, '***'],
      [3, '***'],
    ]);
  });

  it('refuses a result whose column count differs from the target, naming both', async () => {
    const columns: DataColumn[] = [
      { name: 'a', type: 'integer' },
      { name: 'b', type: 'integer' },
    ];
    const into = await target(columns);
    await expect(write('select id from orders', into, columns)).rejects.toThrow(new QueryRejectedError('the query returns 1 columns, the target table has 2'));
    await expect(write('select id, id, id from orders', into, columns)).rejects.toThrow(/returns 3 columns, the target table has 2/);
    expect(await rowsOf(into, columns)).toEqual([]);
  });

  it('refuses hostile SQL and writes nothing', async () => {
    const columns: DataColumn[] = [
      { name: 'a', type: 'string' },
      { name: 'b', type: 'string' },
    ];
    const into = await target(columns);
    const hostile = [
      `select country, email from orders) as governed_query; drop table "org_${orgId}__${orders.table}"; --`,
      `select country, email from orders; drop table orders`,
      `select 'x', 'y' --\n) as g union all select country, email from orders --`,
      `select 1, 2 /* comment */ ) as g, "org_${outsiderOrg}"."${secretsTable}" --`,
      // Well-formed once wrapped: the database (Postgres) or the program check (SQLite) refuses what it reads.
      `select 1, 2 from orders) as g union all select * from (select v, v from ${dialect === 'postgres' ? `"org_${outsiderOrg}"."${secretsTable}"` : `"org_${outsiderOrg}__${secretsTable}"`}`,
      `select 'unterminated, 2`,
      `select "unterminated, 2`,
      `select 1, 2 */ ) as g; drop table orders; /*`,
      `select 1, 2\0; drop table orders`,
    ];
    for (const statement of hostile) {
      await expect(write(statement, into, columns), statement).rejects.toBeInstanceOf(QueryRejectedError);
    }
    expect(await rowsOf(into, columns)).toEqual([]);
    const [{ n }] = (await sql<{ n: number }>`select count(*) as n from ${storage.dataTables.ref(orgId, orders.table)}`.execute(storage.db)).rows;
    expect(Number(n)).toBe(3);
  });

  it('stops a statement past its time limit: QueryTimeoutError, target empty', async () => {
    const columns: DataColumn[] = [{ name: 'n', type: 'integer' }];
    const into = await target(columns);
    await expect(write(SLOW, into, columns, { timeoutMs: 400 })).rejects.toBeInstanceOf(QueryTimeoutError);
    expect(await rowsOf(into, columns)).toEqual([]);
  });

  it('stops a running statement when its signal aborts, with the signal’s reason; the target stays empty and the database writable', async () => {
    const columns: DataColumn[] = [{ name: 'n', type: 'integer' }];
    const into = await target(columns);
    const aborted = new AbortController();
    aborted.abort();
    await expect(write(SLOW, into, columns, { signal: aborted.signal })).rejects.toThrow('This operation was aborted');

    const controller = new AbortController();
    const running = write(SLOW, into, columns, { signal: controller.signal });
    running.catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 800));
    // The platform's own writes go on while the statement computes (SQLite: into a temporary table).
    const scratch = await target(columns);
    const started = performance.now();
    await sql`insert into ${storage.dataTables.ref(orgId, scratch)} (n) values (1)`.execute(storage.db);
    expect(performance.now() - started).toBeLessThan(1000);

    const reason = new Error('stopped by the test');
    const stopping = performance.now();
    controller.abort(reason);
    await expect(running).rejects.toBe(reason);
    expect(performance.now() - stopping).toBeLessThan(3000);
    expect(await rowsOf(into, columns)).toEqual([]);
    expect(await write('select 7', into, columns)).toEqual({ rows: 1 });
    expect(await rowsOf(into, columns)).toEqual([[7]]);
  });

  it('describes result columns: dataset types for pass-through columns, the result’s own for expressions', async () => {
    const described = await storage.describeGoverned({
      sql: 'select id, amount, country, flag, day, email, count(*) over () as n, amount * 2 as doubled, upper(country) as shout from orders',
      params: [],
      orgId,
      datasets: [{ ...orders, columns: orders.columns.map((c) => ({ ...c, masked: c.name === 'email' })) }],
      mask: '***',
      timeoutMs: 10_000,
    });
    expect(described).toEqual([
      { name: 'id', type: 'integer' },
      { name: 'amount', type: 'number' },
      { name: 'country', type: 'string' },
      { name: 'flag', type: 'boolean' },
      { name: 'day', type: 'date' },
      { name: 'email', type: 'string' },
      { name: 'n', type: 'integer' },
      { name: 'doubled', type: 'number' },
      { name: 'shout', type: 'string' },
    ]);
    await expect(storage.describeGoverned({ sql: 'select * from secrets', params: [], orgId, datasets: [], mask: '***', timeoutMs: 10_000 })).rejects.toBeInstanceOf(QueryRejectedError);
  });
});
