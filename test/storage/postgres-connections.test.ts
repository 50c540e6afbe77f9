import http from 'node:http';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POSTGRES_URL, startTestKernel, type TestKernel } from '../harness/index.ts';

// A backend of the platform's pool that dies under a statement (pg_terminate_backend by a DBA, a
// failover) and a shutdown that must stop running statements: Postgres only, SQLite has no backends.
describe.skipIf(!POSTGRES_URL)('Postgres connections of the platform pool', () => {
  let t: TestKernel;
  let projectId: number;
  let databaseUrl: string;

  beforeAll(async () => {
    t = await startTestKernel({ dialect: 'postgres' });
    projectId = (await t.request('POST', '/api/projects', { body: { key: 'CONN', name: 'Connections' } })).body.id;
    const { rows } = await sql<{ name: string }>`select current_database() as name`.execute(t.kernel.storage.db);
    databaseUrl = POSTGRES_URL!.replace(/\/[^/?]*(\?.*)?$/, `/${rows[0].name}$1`);
  });
  afterAll(async () => {
    await t?.stop();
  });

  /** A session of its own on the platform's database, as a DBA's console. */
  async function dbaSession(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    return client;
  }

  /**
   * Waits until a backend runs a statement whose text matches `pattern` (waiting on a lock when
   * `waitEventType` is `Lock`); its pid. `dba` must not be inside a transaction: pg_stat_activity
   * is read once per transaction.
   */
  async function busyBackend(dba: pg.Client, pattern: string, waitEventType?: string): Promise<number> {
    for (;;) {
      const { rows } = await dba.query<{ pid: number }>(
        `select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and state = 'active'
           and query ilike $1 and ($2::text is null or wait_event_type = $2)`,
        [pattern, waitEventType ?? null],
      );
      if (rows[0]) return rows[0].pid;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** A session that holds `lock table … in access exclusive mode` until `release`. */
  async function lockTable(url: string, table: string) {
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    await locker.query('begin');
    await locker.query(`lock table org_1.${table} in access exclusive mode`);
    return {
      async release() {
        await locker.query('rollback');
        await locker.end();
      },
    };
  }

  async function datasetWithRows(name: string, rows: number) {
    const ds = await t.request('POST', '/api/datasets', { body: { name, project_id: projectId, columns: [{ name: 's', type: 'string' }, { name: 'i', type: 'integer' }] } });
    expect(ds.status, JSON.stringify(ds.body)).toBe(201);
    const loaded = await t.request('POST', `/api/datasets/${ds.body.id}/rows`, { body: Array.from({ length: rows }, (_, i) => ({ s: `row ${i}`, i })) });
    expect(loaded.status, JSON.stringify(loaded.body)).toBe(200);
    const { table_name } = await t.kernel.storage.db.selectFrom('datasets').select('table_name').where('id', '=', ds.body.id).executeTakeFirstOrThrow();
    return { id: ds.body.id as number, table: table_name as string };
  }

  /** The dataset as `before` (its two rows), and no staging table of the failed load left. */
  async function expectUnchanged(ds: { id: number; table: string }, before: { row_count: number; version: number; columns: unknown }) {
    const after = (await t.request('GET', `/api/datasets/${ds.id}`)).body;
    expect({ row_count: after.row_count, version: after.version, columns: after.columns }).toEqual({ row_count: before.row_count, version: before.version, columns: before.columns });
    expect((await t.request('GET', `/api/datasets/${ds.id}/rows`)).body.rows.map((r: { s: string }) => r.s)).toEqual(['row 0', 'row 1']);
    const { rows } = await sql<{ name: string }>`select table_name as name from information_schema.tables where table_schema = 'org_1' and table_name like ${`${ds.table}_load_%`}`.execute(t.kernel.storage.db);
    expect(rows).toEqual([]);
  }

  async function stillServing() {
    expect((await t.request('GET', '/healthz')).status).toBe(200);
    expect((await t.request('GET', '/readyz')).status).toBe(200);
    expect((await t.request('GET', '/api/projects')).status).toBe(200);
  }

  it('a backend terminated during a query answers 503 and the server keeps serving', async () => {
    const ds = await datasetWithRows('terminated_read', 3);
    const dba = await dbaSession();
    try {
      // The read waits on a lock another session holds, so it is busy for as long as the test needs.
      const lock = await lockTable(databaseUrl, ds.table);
      const read = t.request('GET', `/api/datasets/${ds.id}/rows`);
      await dba.query('select pg_terminate_backend($1)', [await busyBackend(dba, `%${ds.table}%`, 'Lock')]);
      const res = await read;
      await lock.release();
      expect(res.status, JSON.stringify(res.body)).toBe(503);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(res.body).toMatchObject({ status: 503, detail: expect.stringMatching(/connection to the database was lost/) });
    } finally {
      await dba.end();
    }
    await stillServing();
    const again = await t.request('GET', `/api/datasets/${ds.id}/rows`);
    expect(again.status).toBe(200);
    expect(again.body.rows).toHaveLength(3);
  });

  it('a backend terminated inside the transaction that swaps an upload in answers 503 and leaves the dataset as it was', async () => {
    const ds = await datasetWithRows('terminated_swap', 2);
    const before = (await t.request('GET', `/api/datasets/${ds.id}`)).body;
    const dba = await dbaSession();
    try {
      // The rows are staged; the swap's renaming of the replaced table aside then waits on the lock, inside its transaction.
      const lock = await lockTable(databaseUrl, ds.table);
      const upload = t.request('POST', `/api/datasets/${ds.id}/data?mode=replace`, { body: 's,i\nx,1\n', headers: { 'content-type': 'text/csv' } });
      await dba.query('select pg_terminate_backend($1)', [await busyBackend(dba, `alter table%${ds.table}" rename to%`, 'Lock')]);
      const res = await upload;
      await lock.release();
      expect(res.status, res.text).toBe(503);
    } finally {
      await dba.end();
    }
    await expectUnchanged(ds, before);
    await stillServing();
  });

  it('a backend terminated during the COPY of a CSV upload answers 503 and leaves the dataset as it was', async () => {
    const ds = await datasetWithRows('terminated_copy', 2);
    const before = (await t.request('GET', `/api/datasets/${ds.id}`)).body;
    const dba = await dbaSession();
    try {
      const url = new URL(`/api/datasets/${ds.id}/data?mode=replace`, t.url);
      let request!: http.ClientRequest;
      const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
        request = http.request(url, { method: 'POST', headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'text/csv' } }, (res) => {
          let body = '';
          res.on('data', (chunk) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        request.on('error', reject);
      });
      // Half of the file: the load is under way, its COPY open, and the rest of the body not sent yet.
      request.write(`s,i\n${Array.from({ length: 1500 }, (_, i) => `new ${i},${i}`).join('\n')}\n`);
      await dba.query('select pg_terminate_backend($1)', [await busyBackend(dba, 'copy %_load_%')]);
      request.end(`${Array.from({ length: 1500 }, (_, i) => `more ${i},${i}`).join('\n')}\n`);
      const { status, body } = await answered;
      expect(status, body).toBe(503);
      expect(JSON.parse(body)).toMatchObject({ status: 503, detail: expect.stringMatching(/connection to the database was lost/) });
    } finally {
      await dba.end();
    }
    await expectUnchanged(ds, before);
    await stillServing();
    const upload = await t.request('POST', `/api/datasets/${ds.id}/data?mode=replace`, { body: 's,i\nx,1\n', headers: { 'content-type': 'text/csv' } });
    expect(upload.status, upload.text).toBe(200);
    expect(upload.body.dataset.row_count).toBe(1);
  });

  it('stopping the kernel stops a statement still running once the drain time is over', async () => {
    // A plugin would wait ten minutes for its requests to finish: only the cancel ends this one.
    const other = await startTestKernel({ dialect: 'postgres', env: { SHUTDOWN_TIMEOUT_MS: '200', PLUGIN_DRAIN_TIMEOUT_MS: '600000' } });
    let dba: pg.Client | undefined;
    try {
      const project = await other.request('POST', '/api/projects', { body: { key: 'STOP', name: 'Stop' } });
      const ds = await other.request('POST', '/api/datasets', { body: { name: 'stuck', project_id: project.body.id, columns: [{ name: 's', type: 'string' }] } });
      const { table_name } = await other.kernel.storage.db.selectFrom('datasets').select('table_name').where('id', '=', ds.body.id).executeTakeFirstOrThrow();
      const { rows } = await sql<{ name: string }>`select current_database() as name`.execute(other.kernel.storage.db);
      const url = POSTGRES_URL!.replace(/\/[^/?]*(\?.*)?$/, `/${rows[0].name}$1`);
      dba = new pg.Client({ connectionString: url });
      await dba.connect();
      // The read waits on a lock nobody releases before the kernel has stopped: only a cancel ends it.
      const lock = await lockTable(url, table_name as string);
      const read = other.request('GET', `/api/datasets/${ds.body.id}/rows`);
      const pid = await busyBackend(dba, `%${table_name}%`, 'Lock');
      await other.kernel.stop(); // what SIGTERM runs; without the cancel it waits for the lock forever
      // The request is answered: a 503 the client may retry elsewhere, not a 500 or a dropped connection.
      const answer = await read;
      expect(answer.status, answer.text).toBe(503);
      const running = await dba.query(`select 1 from pg_stat_activity where pid = $1 and state = 'active'`, [pid]);
      expect(running.rows).toEqual([]);
      await lock.release();
    } finally {
      await dba?.end();
      await other.stop().catch(() => undefined);
    }
  });

  it('stopping the kernel stops a governed SQL statement too, answered 503', async () => {
    const other = await startTestKernel({ dialect: 'postgres', env: { SHUTDOWN_TIMEOUT_MS: '200' } });
    try {
      const runaway = other.request('POST', '/api/sql', { body: { sql: 'select count(*) from generate_series(1, 1000000000000)', timeout_ms: 300_000 } });
      // Once it runs under the organization's role, stop the kernel as SIGTERM would.
      const { rows } = await sql<{ name: string }>`select current_database() as name`.execute(other.kernel.storage.db);
      const url = POSTGRES_URL!.replace(/\/[^/?]*(\?.*)?$/, `/${rows[0].name}$1`);
      const dba = new pg.Client({ connectionString: url });
      await dba.connect();
      try {
        await busyBackend(dba, '%generate_series(1, 1000000000000)%');
      } finally {
        await dba.end();
      }
      await other.kernel.stop();
      const answer = await runaway;
      expect(answer.status, answer.text).toBe(503);
      expect(answer.body.detail).toMatch(/shutting down/);
    } finally {
      await other.stop().catch(() => undefined);
    }
  });

  it('a governed SQL backend terminated while busy answers 503, and governed SQL goes on', async () => {
    const runaway = t.request('POST', '/api/sql', { body: { sql: 'select count(*) from generate_series(1, 1000000000000)', timeout_ms: 300_000 } });
    const { rows } = await sql<{ name: string }>`select current_database() as name`.execute(t.kernel.storage.db);
    const dba = new pg.Client({ connectionString: POSTGRES_URL!.replace(/\/[^/?]*(\?.*)?$/, `/${rows[0].name}$1`) });
    await dba.connect();
    try {
      const pid = await busyBackend(dba, '%generate_series(1, 1000000000000)%');
      await dba.query('select pg_terminate_backend($1)', [pid]);
    } finally {
      await dba.end();
    }
    const answer = await runaway;
    expect(answer.status, answer.text).toBe(503);
    expect((await t.request('GET', '/healthz')).status).toBe(200);
    const next = await t.request('POST', '/api/sql', { body: { sql: 'select 1 as one' } });
    expect(next.status, next.text).toBe(200);
    expect(next.body.rows).toEqual([[1]]);
  });
});
