import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

describe.each(DIALECTS)('governed SQL (%s)', (dialect) => {
  let t: TestKernel;
  let editor: string;
  let outsider: string;
  const query = (body: Record<string, unknown>, token?: string) => t.request('POST', '/api/sql', { body, token });

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    editor = (await t.userToken('editor')).token;
    const project = await t.request('POST', '/api/projects', { body: { key: 'SQL', name: 'SQL' } });
    const orders = await t.request('POST', '/api/datasets', {
      body: {
        name: 'orders',
        project_id: project.body.id,
        columns: [
          { name: 'id', type: 'integer' },
          { name: 'amount', type: 'number' },
          { name: 'country', type: 'string' },
          { name: 'email', type: 'string', pii: true },
        ],
      },
    });
    const csv = 'id,amount,country,email\n1,10.5,FR,a@example.test\n2,20,DE,b@example.test\n3,5,FR,c@example.test\n';
    expect((await t.request('POST', `/api/datasets/${orders.body.id}/data`, { body: csv, headers: { 'content-type': 'text/csv' } })).status).toBe(200);
    // Another organization with a dataset of its own.
    outsider = (await t.outsider('sql-outsider')).token;
    const theirProject = await t.request('POST', '/api/projects', { token: outsider, body: { key: 'THEIRS', name: 'Theirs' } });
    const secret = await t.request('POST', '/api/datasets', { token: outsider, body: { name: 'secrets', project_id: theirProject.body.id, columns: [{ name: 'v', type: 'string' }] } });
    await t.request('POST', `/api/datasets/${secret.body.id}/rows`, { token: outsider, body: [{ v: 'top secret' }] });
  });
  afterAll(async () => t?.stop());

  it('answers columns, rows, row_count, truncated and elapsed_ms', async () => {
    const res = await query({ sql: 'select country, sum(amount) as total, count(*) as n from orders group by country order by country' });
    expect(res.status).toBe(200);
    expect(res.body.columns).toEqual([
      { name: 'country', type: 'string' },
      { name: 'total', type: 'number' },
      { name: 'n', type: 'integer' },
    ]);
    expect(res.body.rows).toEqual([
      ['DE', 20, 1],
      ['FR', 15.5, 2],
    ]);
    expect(res.body).toMatchObject({ row_count: 2, truncated: false });
    expect(typeof res.body.elapsed_ms).toBe('number');
    // A number column's total stays a number when it happens to be whole.
    const whole = await query({ sql: "select sum(amount) as total, max(id) as top from orders where country = 'DE'" });
    expect(whole.body.columns).toEqual([
      { name: 'total', type: 'number' },
      { name: 'top', type: 'integer' },
    ]);
    expect(whole.body.rows).toEqual([[20, 2]]);
  });

  it('binds parameters, accepts WITH and a trailing semicolon, and truncates at the limit', async () => {
    expect((await query({ sql: 'select id from orders where amount > $1 and country = $2 order by id', params: [6, 'FR'] })).body.rows).toEqual([[1]]);
    expect((await query({ sql: 'with big as (select * from orders where amount > 6) select count(*) as n from big;' })).body.rows).toEqual([[2]]);
    const limited = await query({ sql: 'select id from orders order by id', limit: 2 });
    expect(limited.body).toMatchObject({ rows: [[1], [2]], row_count: 2, truncated: true });
  });

  it('masks PII columns for callers without datasets.pii.read', async () => {
    expect((await query({ sql: 'select email from orders order by id' })).body.rows[0]).toEqual(['a@example.test']);
    const masked = await query({ sql: 'select email from orders order by id' }, editor);
    expect(masked.status).toBe(200);
    expect(masked.body.rows).toEqual([['***'], ['***'], ['***']]);
    const probe = await query({ sql: "select count(*) from orders where email like 'a%'" }, editor);
    expect(probe.body.rows).toEqual([[0]]);
  });

  it.each([
    ['DDL', 'create table x (a int)'],
    ['DML', 'delete from orders'],
    ['update', "update orders set country = 'XX'"],
    ['insert', 'insert into orders (id) values (9)'],
    ['several statements', 'select 1; select 2'],
    ['PRAGMA', 'pragma table_info(orders)'],
    ['ATTACH', "attach database '/tmp/x.db' as x"],
    ['COPY', "copy orders to '/tmp/out.csv'"],
    ['SELECT INTO', 'select * into copied from orders'],
    ['a kernel table', 'select * from users'],
    ['SQLite catalog', 'select * from sqlite_master'],
    ['Postgres catalog', 'select * from pg_catalog.pg_tables'],
    ['unqualified Postgres catalog', 'select * from pg_tables'],
    ['information schema', 'select * from information_schema.tables'],
    ['a physical table', 'select * from org_1.ds_1'],
    ['file functions', "select pg_read_file('/etc/passwd')"],
    ['settings', "select current_setting('data_directory')"],
    ['extensions', "select load_extension('x')"],
    ['another organization', 'select * from secrets'],
    ['garbage', 'selec * frm orders'],
    ['a WITH query named after a kernel table it reads', 'with users as (select * from users) select * from users'],
    ['a WITH query named after a catalog it reads', 'with pg_shadow as (select * from pg_shadow) select * from pg_shadow'],
    ['a recursive WITH query named after a kernel table', 'with recursive users as (select * from users) select * from users'],
    ['a WITH query reading a later one', 'with a as (select * from personal_access_tokens), personal_access_tokens as (select * from orders) select * from a'],
    ['a WITH query reading itself in a subquery', 'with users as (select * from (select * from users) u) select 1 from users'],
    ['a SQLite pragma function', "select * from pragma_table_info('users')"],
    ['a SQLite pragma function in a WITH query', "with t as (select name from pragma_table_list) select * from t"],
  ])('refuses %s with a 400 naming the query', async (_what, sql) => {
    const res = await query({ sql });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.errors[0].path).toBe('body.sql');
    expect(res.text).not.toMatch(/password_hash|token_hash|scrypt/);
  });

  it('lets a WITH query read the ones before it', async () => {
    const res = await query({ sql: 'with fr as (select * from orders where country = $1), big as (select * from fr where amount > 6) select count(*) as n from big', params: ['FR'] });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.rows).toEqual([[1]]);
  });

  it('leaves the data as it was after every refused statement', async () => {
    const res = await query({ sql: 'select count(*) as n, sum(amount) as s from orders' });
    expect(res.body.rows).toEqual([[3, 35.5]]);
  });

  it('keeps each organization to its own datasets', async () => {
    const theirs = await query({ sql: 'select v from secrets' }, outsider);
    expect(theirs.body.rows).toEqual([['top secret']]);
    const mine = await query({ sql: 'select * from orders' }, outsider);
    expect(mine.status).toBe(400);
    expect(mine.body.detail).toMatch(/no dataset named "orders"/);
    expect((await t.request('POST', '/api/sql', { token: outsider, body: { sql: 'select * from orders' }, headers: { 'x-org-id': '1' } })).status).toBe(403);
  });

  it('stops a runaway query with a clear error while the server keeps answering', async () => {
    const runaway = query({ sql: 'with recursive r(n) as (select 1 union all select n + 1 from r) select count(*) from r', timeout_ms: 1500 });
    const healthStarted = performance.now();
    const health = await fetch(`${t.url}/healthz`);
    expect(health.status).toBe(200);
    expect(performance.now() - healthStarted).toBeLessThan(1000);
    const res = await runaway;
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/longer than 1500 ms and was stopped/);
    // and the next query works
    expect((await query({ sql: 'select count(*) from orders' })).body.rows).toEqual([[3]]);
  });

  it('audits every execution with the query hash, datasets and row count', async () => {
    const sql = 'select id from orders where id = 2';
    await query({ sql });
    const audit = await t.request('GET', '/api/audit?action=sql.execute&limit=500');
    const hash = crypto.createHash('sha256').update(sql).digest('hex');
    const event = audit.body.items.find((e: { details: { query_sha256?: string } }) => e.details.query_sha256 === hash);
    expect(event).toBeDefined();
    expect(event.details).toMatchObject({ row_count: 1, truncated: false });
    expect(event.details.datasets).toHaveLength(1);
    expect(JSON.stringify(audit.body)).not.toContain('where id = 2');
    expect(audit.body.items.some((e: { outcome: string; details: { reason?: string } }) => e.outcome === 'failure' && e.details.reason === 'timeout')).toBe(true);
  });

  it('validates the request', async () => {
    expect((await query({ sql: '' })).status).toBe(400);
    expect((await query({ sql: 'select 1', limit: 0 })).status).toBe(400);
    expect((await query({ sql: 'select 1', timeout_ms: 10_000_000 })).status).toBe(400);
    expect((await t.request('POST', '/api/sql', { token: null, body: { sql: 'select 1' } })).status).toBe(401);
  });
});
