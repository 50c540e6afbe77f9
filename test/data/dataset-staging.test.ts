import http from 'node:http';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, until, type TestKernel } from '../harness/index.ts';

// An upload stages its rows in a table of its own (`<table>_load_<8 hex>`); a process killed
// mid-upload (SIGKILL, OOM) leaves that table behind. Start-up drops those no live load claims.
describe.each(DIALECTS)('staging tables of uploads cut short (%s)', (dialect) => {
  let t: TestKernel;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
  });
  afterAll(async () => {
    await t?.stop();
  });

  /** Staging tables of organization 1, as the database lists them. */
  async function stagingTables(): Promise<string[]> {
    const db = t.kernel.storage.db;
    const { rows } =
      dialect === 'postgres'
        ? await sql<{ name: string }>`select table_name as name from information_schema.tables where table_schema = 'org_1' and table_name like '%\_load\_%'`.execute(db)
        : await sql<{ name: string }>`select substr(name, length('org_1__') + 1) as name from sqlite_master where type = 'table' and name like 'org\_1\_\_%\_load\_%' escape '\\'`.execute(db);
    return rows.map((r) => r.name).sort();
  }

  it('leaves no table behind a replace or an append: the replaced rows\u2019 table and the staging table are dropped once the swap committed', async () => {
    const project = await t.request('POST', '/api/projects', { body: { key: 'SWAP', name: 'Swaps' } });
    const created = await t.request('POST', '/api/datasets', { body: { name: 'swapped', project_id: project.body.id, columns: [{ name: 'n', type: 'integer' }] } });
    const id = created.body.id as number;
    const before = await stagingTables();
    const upload = (csv: string, mode: string) => t.request('POST', `/api/datasets/${id}/data?mode=${mode}`, { body: csv, headers: { 'content-type': 'text/csv' } });
    expect((await upload(`n\n${Array.from({ length: 3000 }, (_, i) => i).join('\n')}\n`, 'replace')).status).toBe(200);
    expect((await upload('n\n1\n2\n', 'replace')).status).toBe(200);
    expect((await upload('n\n3\n', 'append')).status).toBe(200);
    // The drop follows the answer (on SQLite in another process): it is there within moments.
    expect(await until(stagingTables, (tables) => tables.length === before.length)).toEqual(before);
    expect((await t.request('GET', `/api/datasets/${id}/rows?limit=10`)).body.rows.map((r: { n: number }) => r.n)).toEqual([1, 2, 3]);
  });

  it.runIf(dialect === 'postgres')('swaps in a table the planner has statistics of (pg_stats), so its first queries are planned for its data', async () => {
    const project = await t.request('POST', '/api/projects', { body: { key: 'STATS', name: 'Statistics' } });
    const created = await t.request('POST', '/api/datasets', { body: { name: 'analyzed', project_id: project.body.id, columns: [{ name: 'n', type: 'integer' }] } });
    const id = created.body.id as number;
    const upload = await t.request('POST', `/api/datasets/${id}/data?mode=replace`, { body: `n\n${Array.from({ length: 20_000 }, (_, i) => i).join('\n')}\n`, headers: { 'content-type': 'text/csv' } });
    expect(upload.status, upload.text).toBe(200);
    const { db } = t.kernel.storage;
    const { table_name: table } = await db.selectFrom('datasets').select('table_name').where('id', '=', id).executeTakeFirstOrThrow();
    const analyzed = async () => (await sql<{ n: number }>`select count(*)::int as n from pg_stats where schemaname = 'org_1' and tablename = ${table} and attname = 'n'`.execute(db)).rows[0].n;
    expect(await analyzed()).toBe(1);
  });

  it('start-up drops a killed upload\u2019s staging table, keeps a live upload\u2019s, and leaves the dataset intact', async () => {
    const project = await t.request('POST', '/api/projects', { body: { key: 'STAGE', name: 'Staging' } });
    const columns = [
      { name: 's', type: 'string' },
      { name: 'i', type: 'integer' },
    ] as const;
    const created = await t.request('POST', '/api/datasets', { body: { name: 'staged', project_id: project.body.id, columns } });
    const id = created.body.id as number;
    expect((await t.request('POST', `/api/datasets/${id}/data`, { body: 's,i\na,1\nb,2\n', headers: { 'content-type': 'text/csv' } })).status).toBe(200);
    const { table_name: table } = await t.kernel.storage.db.selectFrom('datasets').select('table_name').where('id', '=', id).executeTakeFirstOrThrow();

    // What a replace upload killed mid-way leaves: its staging table with the rows it had loaded, claimed by no load.
    const { dataTables, db } = t.kernel.storage;
    const orphan = `${table}_load_0badc0de`;
    await dataTables.create(db, 1, orphan, [...columns]);
    const writer = await dataTables.openWriter(db, 1, orphan, [...columns]);
    await writer.write([['half-loaded', 3]]);
    await writer.end();

    // A replace upload streaming right now on this instance: its staging table exists, its file is not all sent.
    let request!: http.ClientRequest;
    const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
      request = http.request(new URL(`/api/datasets/${id}/data?mode=replace`, t.url), { method: 'POST', headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'text/csv' } }, (res) => {
        let body = '';
        res.on('data', (chunk) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      request.on('error', reject);
    });
    request.write(`s,i\n${Array.from({ length: 2500 }, (_, i) => `new ${i},${i}`).join('\n')}\n`);
    let live: string | undefined;
    while (!live) {
      live = (await stagingTables()).find((name) => name !== orphan);
      if (!live) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(await stagingTables()).toEqual([orphan, live].sort());

    // Another instance starts on the same database (as a restart does): the orphan goes, the live load's table stays.
    const peer = await t.peer();
    expect(await stagingTables()).toEqual([live]);
    const during = await peer.request('GET', `/api/datasets/${id}/rows`);
    expect(during.body.rows.map((r: { s: string }) => r.s)).toEqual(['a', 'b']);
    // Reloading the datasets plugin on the instance running the load (its init looks for abandoned
    // staging tables again) leaves the load's own table alone.
    expect((await t.request('POST', '/api/plugins/datasets/reload')).status).toBe(200);
    expect(await stagingTables()).toEqual([live]);

    request.end('last,9999\n');
    const { status, body } = await answered;
    expect(status, body).toBe(200);
    expect(JSON.parse(body).dataset.row_count).toBe(2501);
    expect(await stagingTables()).toEqual([]);
  });
});
