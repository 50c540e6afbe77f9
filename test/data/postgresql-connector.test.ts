import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratchDatabase, DIALECTS, POSTGRES_URL, startTestKernel, tempDir, type TestKernel } from '../harness/index.ts';

// The external source is always a real Postgres (the machine's); the platform runs on each adapter.
describe.skipIf(!POSTGRES_URL).each(DIALECTS)('postgresql connector (%s)', (dialect) => {
  let t: TestKernel;
  let source: { url: string; drop(): Promise<void> };
  let connectorId: number;
  let datasetId: number;
  const temp = tempDir();

  beforeAll(async () => {
    source = await createScratchDatabase('postgres', temp.dir);
    const client = new pg.Client({ connectionString: source.url });
    await client.connect();
    await client.query(`create table customers (id bigint primary key, name text, balance numeric(10,2), active boolean, born date, seen timestamptz, tags jsonb)`);
    await client.query(`insert into customers select i, 'customer ' || i, i * 1.5, i % 2 = 0, date '2000-01-01' + i, timestamptz '2024-01-01 00:00:00+00' + i * interval '1 hour', jsonb_build_object('n', i)
      from generate_series(1, 2500) as i`);
    // A SELECT that writes: only the read-only transaction stops it.
    await client.query(`create function purge_customers() returns bigint language sql as 'with gone as (delete from customers returning 1) select count(*) from gone'`);
    await client.end();
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1,localhost' } });
    const url = new URL(source.url);
    const created = await t.request('POST', '/api/connectors', {
      body: {
        name: 'warehouse',
        type: 'postgresql',
        config: { host: url.hostname || '127.0.0.1', port: Number(url.port || 5432), database: url.pathname.slice(1), user: decodeURIComponent(url.username) || 'postgres', password: 'unused-but-secret' },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.config.password).toBe('********');
    connectorId = created.body.id;
    const project = await t.request('POST', '/api/projects', { body: { key: 'IMPORTS', name: 'Imports' } });
    datasetId = (await t.request('POST', '/api/datasets', { body: { name: 'customers', project_id: project.body.id } })).body.id;
  });
  afterAll(async () => {
    await t?.stop();
    await source?.drop();
    temp.remove();
  });

  const action = (name: string, body: unknown) => t.request('POST', `/api/connectors/${connectorId}/actions/${name}`, { body });
  const sourceRows = async () => {
    const client = new pg.Client({ connectionString: source.url });
    await client.connect();
    try {
      return (await client.query('select count(*)::int as n from customers')).rows[0].n as number;
    } finally {
      await client.end();
    }
  };

  it('tests the connection and lists the tables', async () => {
    expect((await t.request('POST', `/api/connectors/${connectorId}/test`)).body).toMatchObject({ ok: true, message: expect.stringMatching(/^connected: PostgreSQL/) });
    const tables = await action('list_tables', {});
    expect(tables.status).toBe(200);
    expect(tables.body.result).toEqual([{ schema: 'public', name: 'customers', kind: 'BASE TABLE' }]);
  });

  it('imports a table into a dataset with typed columns', async () => {
    const res = await action('import', { dataset_id: datasetId, table: { name: 'customers' } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.result).toMatchObject({ dataset_id: datasetId, rows_loaded: 2500 });
    expect(res.body.result.columns.map((c: { name: string; type: string }) => [c.name, c.type])).toEqual([
      ['id', 'integer'],
      ['name', 'string'],
      ['balance', 'number'],
      ['active', 'boolean'],
      ['born', 'date'],
      ['seen', 'timestamp'],
      ['tags', 'json'],
    ]);
    const rows = await t.request('GET', `/api/datasets/${datasetId}/rows?filter=id:eq:3`);
    expect(rows.body.rows).toEqual([{ id: 3, name: 'customer 3', balance: 4.5, active: false, born: '2000-01-04', seen: '2024-01-01T03:00:00.000Z', tags: { n: 3 } }]);
  });

  it('imports a query, appending, all or nothing', async () => {
    const before = (await t.request('GET', `/api/datasets/${datasetId}`)).body;
    const res = await action('import', { dataset_id: datasetId, query: 'select * from customers where id <= 10', mode: 'append' });
    expect(res.body.result.rows_loaded).toBe(10);
    expect((await t.request('GET', `/api/datasets/${datasetId}`)).body.row_count).toBe(before.row_count + 10);
    const bad = await action('import', { dataset_id: datasetId, query: 'select id, name as nickname from customers', mode: 'append' });
    expect(bad.status).toBe(422);
    const broken = await action('import', { dataset_id: datasetId, query: 'select * from nowhere' });
    expect(broken.status).toBe(422);
    expect((await t.request('GET', `/api/datasets/${datasetId}`)).body.row_count).toBe(before.row_count + 10);
  });

  it('also takes a connection URL, kept secret like a password', async () => {
    const byUrl = await t.request('POST', '/api/connectors', { body: { name: 'warehouse-url', type: 'postgresql', config: { url: source.url } } });
    expect(byUrl.status, JSON.stringify(byUrl.body)).toBe(201);
    expect(byUrl.body.config.url).toBe('********');
    expect((await t.request('POST', `/api/connectors/${byUrl.body.id}/test`)).body.ok).toBe(true);
    const both = await t.request('POST', '/api/connectors', { body: { name: 'both', type: 'postgresql', config: { url: source.url, host: '127.0.0.1', database: 'x', user: 'y' } } });
    expect(both.status).toBe(400);
    const neither = await t.request('POST', '/api/connectors', { body: { name: 'neither', type: 'postgresql', config: { port: 5432 } } });
    expect(neither.body.errors[0].path).toBe('body.config.url');
  });

  it('answers 502 when the source ends the session mid-import, and keeps serving', async () => {
    const before = (await t.request('GET', `/api/datasets/${datasetId}`)).body;
    const locker = new pg.Client({ connectionString: source.url });
    const dba = new pg.Client({ connectionString: source.url });
    await Promise.all([locker.connect(), dba.connect()]);
    try {
      // The import's cursor waits on the table's lock; the source's administrator then ends its session.
      await locker.query('begin');
      await locker.query('lock table customers in access exclusive mode');
      const imported = action('import', { dataset_id: datasetId, table: { name: 'customers' } });
      for (;;) {
        const { rows } = await dba.query(`select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and query ilike 'declare import_cursor%' and wait_event_type = 'Lock'`);
        if (rows.length) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const res = await imported;
      await locker.query('rollback');
      expect(res.status, JSON.stringify(res.body)).toBe(502);
      expect(res.body.detail).toMatch(/^the connection to .+ was lost: /);
      expect(res.body.detail).not.toContain('unused-but-secret');
    } finally {
      await Promise.all([locker.end(), dba.end()]);
    }
    expect((await t.request('GET', '/healthz')).status).toBe(200);
    const after = (await t.request('GET', `/api/datasets/${datasetId}`)).body;
    expect({ row_count: after.row_count, version: after.version }).toEqual({ row_count: before.row_count, version: before.version });
    const again = await action('import', { dataset_id: datasetId, query: 'select * from customers where id <= 10', mode: 'append' });
    expect(again.status, JSON.stringify(again.body)).toBe(200);
  });

  it('refuses what it should', async () => {
    expect((await action('import', { dataset_id: datasetId })).status).toBe(400);
    expect((await action('import', { dataset_id: datasetId, table: { name: 'x; drop table customers' } })).status).toBe(400);
    expect((await action('import', { dataset_id: 99_999, table: { name: 'customers' } })).status).toBe(404);
    // A writing "query" is refused before it reaches the source; one that writes through a
    // function is stopped by the read-only session. Either way the source keeps its rows.
    const notSelect = await action('import', { dataset_id: datasetId, query: 'delete from customers returning *' });
    expect(notSelect.status).toBe(400);
    expect(notSelect.body.errors[0].path).toBe('body.query');
    expect((await action('import', { dataset_id: datasetId, query: 'select purge_customers()' })).status).toBe(422);
    expect(await sourceRows()).toBe(2500);
    // Several statements never run: `commit` would end the read-only transaction and let the delete through.
    for (const query of ['select 1; commit; delete from customers', 'select 1; select 2', 'select 1; commit; delete from customers;']) {
      const res = await action('import', { dataset_id: datasetId, query });
      expect(res.status, query).toBe(400);
      expect(res.body.errors[0].path, query).toBe('body.query');
      expect(res.body.detail, query).toMatch(/exactly one statement/);
    }
    // `'a\'` is a string and then more statements, to Postgres and to its own parser alike: refused
    // before it reaches the source (where the extended protocol would refuse it too).
    const smuggled = await action('import', { dataset_id: datasetId, query: "select 'a\\'; commit; delete from customers; --'" });
    expect(smuggled.status).toBe(400);
    expect(smuggled.body.errors[0].path).toBe('body.query');
    expect(smuggled.body.detail).toMatch(/exactly one statement/);
    expect(await sourceRows()).toBe(2500);
    // A viewer may not import; a private address is refused without OUTBOUND_ALLOWED_HOSTS.
    const viewer = (await t.userToken('viewer')).token;
    expect((await t.request('POST', `/api/connectors/${connectorId}/actions/import`, { token: viewer, body: { dataset_id: datasetId, table: { name: 'customers' } } })).status).toBe(403);
  });
});
