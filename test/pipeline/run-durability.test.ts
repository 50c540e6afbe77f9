import fs from 'node:fs';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratchDatabase, DIALECTS, REPO_ROOT, startTestKernel, tempDir, until, type DialectName, type TestKernel } from '../harness/index.ts';
import { client, databaseQuery, exited, killAll, killHard, launch, serverSettings, type ServerProcess } from '../harness/server-process.ts';
import { createRecipe, emptyDataset, finished, loadDataset, rowsOf, writeSlowCopier } from './pipeline-helpers.ts';

/**
 * Runs outlive the instance running them: a run cut short by a SIGKILL of its server process
 * leaves its outputs as they were and runs again from the start once (attempt 2); killed during
 * both attempts it ends failed ("Interrupted"), its outputs still as they were. Two kernels on one
 * database never run one run twice. A cancelled run stops its statement and keeps its outputs.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const FINAL = ['succeeded', 'failed', 'cancelled', 'skipped'];
const ROWS = 50_000;
const OLD_ROWS = [
  { id: 1, word: 'old one' },
  { id: 2, word: 'old two' },
  { id: 3, word: 'old three' },
];
const OLD_CSV = `id,word\n${OLD_ROWS.map((r) => `${r.id},${r.word}`).join('\n')}\n`;
/** Several seconds of work in the database, with few result rows; its first 101 come at once (describing it on SQLite reads that many). */
const SLOW_QUERY = 'with recursive n(i) as (select 1 union all select i + 1 from n where i < 30000000) select i from n where i <= 1000 or i = 30000000';

/** The database itself, read while no server is running (or beside one): no API in between. */
function databaseOf(dialect: DialectName, url: string) {
  const query = databaseQuery(dialect, url);
  const physical = (table: string) => (dialect === 'sqlite' ? `"org_1__${table}"` : `org_1."${table}"`);
  return {
    query,
    async dataset(id: number) {
      const [row] = await query<{ table_name: string; version: number; row_count: number }>('select table_name, version, row_count from datasets where id = $1', [id]);
      return { table: row.table_name, version: Number(row.version), rowCount: Number(row.row_count) };
    },
    async rows(table: string) {
      return (await query<{ id: number | string; word: string }>(`select id, word from ${physical(table)} order by id`)).map((r) => ({ id: Number(r.id), word: r.word }));
    },
    async counts(table: string) {
      const [row] = await query<{ n: number; ids: number; low: number; high: number }>(`select count(*) as n, count(distinct id) as ids, min(id) as low, max(id) as high from ${physical(table)}`);
      return { n: Number(row.n), ids: Number(row.ids), low: Number(row.low), high: Number(row.high) };
    },
    /** Staging tables of loads (`<table>_load_<hex>`), whoever made them. */
    async staging() {
      const rows =
        dialect === 'sqlite'
          ? await query<{ name: string }>("select name from sqlite_master where type = 'table' and name like '%\\_load\\_%' escape '\\'")
          : await query<{ name: string }>("select table_schema || '.' || table_name as name from information_schema.tables where table_name like '%\\_load\\_%'");
      return rows.map((r) => r.name).sort();
    },
    async workOf(runId: number) {
      const [row] = await query<{ attempts: number; status: string; reason: string | null }>('select w.attempts, w.status, w.reason from background_work w join pipeline_runs r on r.work_id = w.id where r.id = $1', [runId]);
      return { attempts: Number(row.attempts), status: row.status, reason: row.reason };
    },
  };
}

describe.each(DIALECTS)('a run whose server process is killed (SIGKILL) mid-run (%s)', (dialect) => {
  const temp = tempDir('dp-durability-');
  const live: ServerProcess[] = [];
  let database: Awaited<ReturnType<typeof createScratchDatabase>>;
  let db: ReturnType<typeof databaseOf>;
  let env: Record<string, string>;
  let token: string;
  let server: ServerProcess;
  let api: ReturnType<typeof client>;
  let project: number;
  let input: number;

  const restart = async () => {
    server = await launch(env, live);
    api = client(server.url, token);
  };
  /** A server to talk to, whatever a failed test before left. */
  const serving = async () => {
    if (exited(server)) await restart();
  };
  const run = async (id: number) => (await api('GET', `/api/pipeline/runs/${id}`)).body as Record<string, any>;
  const logs = async (id: number) => ((await api('GET', `/api/pipeline/runs/${id}/logs`)).body.items as { message: string }[]).map((l) => l.message);
  /** Waits until the run is running its `attempt`th attempt (that many "reading" lines) and the handler handed rows over since. */
  const writing = async (id: number, attempt: number) => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const [state, lines] = await Promise.all([run(id), logs(id)]);
      const starts = lines.flatMap((l, i) => (l.startsWith('reading ') ? [i] : []));
      if (state.status === 'running' && starts.length === attempt && lines.slice(starts[attempt - 1]).some((l) => /^wrote \d+ rows$/.test(l))) return;
      if (FINAL.includes(state.status) || Date.now() > deadline) throw new Error(`run ${id} did not get to writing (attempt ${attempt}): ${JSON.stringify(state)} ${JSON.stringify(lines)}`);
      await sleep(100);
    }
  };
  const ended = async (id: number, timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    let state = await run(id);
    while (!FINAL.includes(state.status) && Date.now() < deadline) {
      await sleep(200);
      state = await run(id);
    }
    return state;
  };
  /** An output already holding OLD_ROWS (version 2), and a slow copy of the input into it. */
  const slowRecipe = async (name: string) => {
    const created = await api('POST', '/api/datasets', { name, project_id: project, columns: [{ name: 'id', type: 'integer' }, { name: 'word', type: 'string' }] });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const loaded = await api('POST', `/api/datasets/${created.body.id}/data`, OLD_CSV, 'text/csv');
    expect(loaded.status, JSON.stringify(loaded.body)).toBe(200);
    const recipe = await api('POST', '/api/pipeline/recipes', { project_id: project, name: `copy into ${name}`, type: 'slow_copy', inputs: [input], outputs: [created.body.id], params: { delay_ms: 40 } });
    expect(recipe.status, JSON.stringify(recipe.body)).toBe(201);
    const out = await db.dataset(created.body.id);
    expect(out.version).toBe(2);
    return { output: created.body.id as number, table: out.table, recipe: recipe.body.id as number };
  };
  const start = async (recipe: number) => {
    const started = await api('POST', `/api/pipeline/recipes/${recipe}/run`);
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    return started.body.run.id as number;
  };

  beforeAll(async () => {
    const plugins = path.join(temp.dir, 'plugins');
    fs.mkdirSync(plugins);
    writeSlowCopier(plugins);
    database = await createScratchDatabase(dialect, temp.dir);
    db = databaseOf(dialect, database.url);
    ({ env, token } = await serverSettings(temp.dir, database.url, [path.join(REPO_ROOT, 'manifests'), plugins]));
    await restart();
    project = (await api('POST', '/api/projects', { key: 'DUR', name: 'Durability' })).body.id;
    const created = await api('POST', '/api/datasets', { name: 'numbers', project_id: project, columns: [{ name: 'id', type: 'integer' }, { name: 'word', type: 'string' }] });
    input = created.body.id;
    const csv = `id,word\n${Array.from({ length: ROWS }, (_, i) => `${i + 1},word ${i + 1}`).join('\n')}\n`;
    const loaded = await api('POST', `/api/datasets/${input}/data`, csv, 'text/csv');
    expect(loaded.status, JSON.stringify(loaded.body)).toBe(200);
  }, 90_000);
  afterAll(async () => {
    await killAll(live);
    await database?.drop();
    temp.remove();
  });

  // A restarted instance claims work only once its plugins are loaded (kernel/kernel.ts start():
  // work.start() after registry.start()); before that, attempt 2 was claimed while the capability
  // catalogue was still empty and ended the run "Forbidden — admin may not run recipes any more".
  it('keeps the old rows through the kill, runs again from the start once (attempt 2) after the restart, and writes the new rows exactly once', { timeout: 90_000 }, async () => {
    await serving();
    const { output, table, recipe } = await slowRecipe('copied');
    const id = await start(recipe);
    await writing(id, 1);
    // Rows are being written (to a staging table): readers still see the old ones.
    expect((await api('GET', `/api/datasets/${output}/rows`)).body.rows).toEqual(OLD_ROWS);

    await killHard(server);
    // The database itself, with no server: the old rows, the old version, and the killed load's staging table.
    expect(await db.rows(table)).toEqual(OLD_ROWS);
    expect(await db.dataset(output)).toMatchObject({ version: 2, rowCount: 3 });
    expect(await db.staging(), 'the kill came while rows were loading').toHaveLength(1);

    await restart();
    const done = await ended(id, 45_000);
    const lines = await logs(id);
    expect(done, JSON.stringify({ done, lines })).toMatchObject({ status: 'succeeded', rows_written: ROWS, error: null });
    expect(lines.filter((l) => l.startsWith('reading '))).toHaveLength(2);
    expect(lines.filter((l) => l.startsWith('attempt 2: the instance running the previous attempt stopped'))).toHaveLength(1);
    expect(lines.filter((l) => /^attempt \d/.test(l))).toHaveLength(1);
    expect(await db.workOf(id)).toEqual({ attempts: 2, status: 'succeeded', reason: null });

    expect(await db.counts(table)).toEqual({ n: ROWS, ids: ROWS, low: 1, high: ROWS });
    expect(await db.dataset(output)).toMatchObject({ version: 3, rowCount: ROWS });
    expect((await api('GET', `/api/datasets/${output}`)).body).toMatchObject({ version: 3, row_count: ROWS });
    expect(await db.staging()).toEqual([]);
  });

  it('killed during both attempts, it ends failed ("Interrupted") after the next restart, its output as it was', { timeout: 90_000 }, async () => {
    await serving();
    const { output, table, recipe } = await slowRecipe('copied_twice');
    const id = await start(recipe);
    await writing(id, 1);
    await killHard(server);
    await restart();
    await writing(id, 2);
    expect((await logs(id)).filter((l) => l.startsWith('attempt 2: '))).toHaveLength(1);
    await killHard(server);
    expect(await db.rows(table)).toEqual(OLD_ROWS);
    expect(await db.dataset(output)).toMatchObject({ version: 2, rowCount: 3 });

    const restarted = Date.now();
    await restart();
    const done = await ended(id, 25_000);
    // The settle sweep runs every 15 s: the run ends within one sweep of the restart.
    expect(Date.now() - restarted).toBeLessThan(25_000);
    expect(done, JSON.stringify({ done, lines: await logs(id) })).toMatchObject({ status: 'failed', error: { title: 'Interrupted' } });
    expect(done.error.detail).toMatch(/stopped \(killed or crashed\) twice/);
    expect(await db.workOf(id)).toEqual({ attempts: 2, status: 'failed', reason: 'lost' });
    expect((await logs(id)).filter((l) => l.startsWith('reading '))).toHaveLength(2);

    expect(await db.rows(table)).toEqual(OLD_ROWS);
    expect(await db.dataset(output)).toMatchObject({ version: 2, rowCount: 3 });
    expect((await api('GET', `/api/datasets/${output}/rows`)).body.rows).toEqual(OLD_ROWS);
    expect(await db.staging()).toEqual([]);
    // The server is still whole: the other output (from the first case) reads as it was written.
    expect((await api('GET', '/healthz')).status).toBe(200);
  });
});

describe.each(DIALECTS)('two kernels on one database (%s)', (dialect) => {
  let t: TestKernel;

  beforeAll(async () => {
    t = await startTestKernel({ dialect, env: { WORKER_POLL_MS: '200' } });
  });
  afterAll(async () => t?.stop());

  it('never run one run twice: 20 runs started alternately on both each run once and grow each output by one version', { timeout: 90_000 }, async () => {
    const peer = await t.peer();
    const project = (await t.request('POST', '/api/projects', { body: { key: 'TWO', name: 'Two kernels' } })).body.id;
    const input = await loadDataset(t, project, 'thousand', ['id:integer', 'word:string'], Array.from({ length: 1000 }, (_, i) => `${i + 1},word ${i + 1}`));
    const targets: { recipe: number; output: number; version: number; keep: number }[] = [];
    for (let i = 0; i < 20; i++) {
      const output = await emptyDataset(t, project, `kept_${i}`);
      const recipe = await createRecipe(t, { project_id: project, name: `keep ${i}`, type: 'filter', inputs: [input], outputs: [output], params: { conditions: [`id:gt:${i * 10}`] } });
      targets.push({ recipe, output, version: (await t.request('GET', `/api/datasets/${output}`)).body.version, keep: 1000 - i * 10 });
    }
    // Both kernels set their organization's role up while the other's runs grant on their staging
    // tables (Postgres): the grants take the namespace lock the setup holds, so none of them fails.
    const runIds: number[] = [];
    for (const [i, { recipe }] of targets.entries()) {
      const via = i % 2 ? peer : t;
      const started = await via.request('POST', `/api/pipeline/recipes/${recipe}/run`);
      expect(started.status, started.text).toBe(202);
      runIds.push(started.body.run.id);
    }
    for (const [i, id] of runIds.entries()) {
      const run = await finished(t, id, 60_000);
      expect(run, JSON.stringify(run)).toMatchObject({ status: 'succeeded', rows_written: targets[i].keep });
      const lines = ((await t.request('GET', `/api/pipeline/runs/${id}/logs`)).body.items as { message: string }[]).map((l) => l.message);
      expect(lines.filter((l) => l.startsWith('reading ')), JSON.stringify(lines)).toHaveLength(1);
      expect(lines.filter((l) => l.startsWith('attempt '))).toEqual([]);
      const dataset = (await t.request('GET', `/api/datasets/${targets[i].output}`)).body;
      expect(dataset).toMatchObject({ version: targets[i].version + 1, row_count: targets[i].keep });
    }
    const work = await t.kernel.storage.db
      .selectFrom('pipeline_runs as r')
      .innerJoin('background_work as w', 'w.id', 'r.work_id')
      .select(['r.id', 'w.attempts', 'w.status'])
      .where('r.id', 'in', runIds)
      .execute();
    expect(work.map((w) => ({ id: Number(w.id), attempts: Number(w.attempts), status: w.status })).sort((a, b) => a.id - b.id)).toEqual(runIds.map((id) => ({ id, attempts: 1, status: 'succeeded' })));
  });

  it('gives a recipe run\u2019s work RECIPE_TIMEOUT_S (3600 s by default) before the kernel stops it as timed out', async () => {
    const project = (await t.request('POST', '/api/projects', { body: { key: 'LIMIT', name: 'Time limit' } })).body.id;
    const input = await loadDataset(t, project, 'limit_in', ['id:integer'], ['1']);
    const recipe = await createRecipe(t, { project_id: project, name: 'limit', type: 'filter', inputs: [input], outputs: [await emptyDataset(t, project, 'limit_out')], params: { conditions: ['id:gt:0'] } });
    const started = await t.request('POST', `/api/pipeline/recipes/${recipe}/run`);
    expect((await finished(t, started.body.run.id)).status).toBe('succeeded');
    const work = await t.kernel.storage.db
      .selectFrom('pipeline_runs as r')
      .innerJoin('background_work as w', 'w.id', 'r.work_id')
      .select('w.timeout_ms')
      .where('r.id', '=', started.body.run.id)
      .executeTakeFirstOrThrow();
    expect(Number(work.timeout_ms)).toBeGreaterThanOrEqual(3600 * 1000);
  });
});

describe.each(DIALECTS)('cancelling a run (%s)', (dialect) => {
  let t: TestKernel;
  let project: number;
  let input: number;

  /** Statements of the slow query running in this kernel's database right now (Postgres; none on SQLite by this probe). */
  const slowStatements = async (): Promise<number> => {
    if (dialect !== 'postgres') return 0;
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and state = 'active' and query like ${'%recursive n(i)%'}`.execute(t.kernel.storage.db);
    return Number(rows[0].n);
  };
  const slowRecipe = async (name: string) => {
    const output = await loadDataset(t, project, name, ['i:integer'], ['7', '8', '9']);
    const recipe = await createRecipe(t, { project_id: project, name: `slow ${name}`, type: 'sql', inputs: [input], outputs: [output], params: { query: SLOW_QUERY } });
    return { output, recipe, version: (await t.request('GET', `/api/datasets/${output}`)).body.version as number };
  };
  const start = async (recipe: number) => {
    const started = await t.request('POST', `/api/pipeline/recipes/${recipe}/run`);
    expect(started.status, started.text).toBe(202);
    return started.body.run.id as number;
  };
  const status = async (id: number) => (await t.request('GET', `/api/pipeline/runs/${id}`)).body.status as string;
  const keptOld = async ({ output, version }: { output: number; version: number }) => {
    expect(await rowsOf(t, output)).toEqual([{ i: 7 }, { i: 8 }, { i: 9 }]);
    expect((await t.request('GET', `/api/datasets/${output}`)).body).toMatchObject({ version, row_count: 3 });
  };

  beforeAll(async () => {
    t = await startTestKernel({ dialect, env: { WORKER_CONCURRENCY: '1', WORKER_POLL_MS: '200' } });
    project = (await t.request('POST', '/api/projects', { body: { key: 'CANCEL', name: 'Cancel' } })).body.id;
    input = await loadDataset(t, project, 'few', ['n:integer'], ['1', '2']);
  });
  afterAll(async () => t?.stop());

  it('stops a running statement: the run ends cancelled within 5 s, the output as it was, the server answering meanwhile; a second cancel is a 409', { timeout: 60_000 }, async () => {
    const target = await slowRecipe('slow_out');
    const id = await start(target.recipe);
    expect(await until(() => status(id), (s) => s === 'running', 15_000)).toBe('running');
    if (dialect === 'postgres') expect(await until(slowStatements, (n) => n > 0, 10_000), 'the statement is running in the database').toBeGreaterThan(0);
    else await sleep(500); // the governed process is computing
    const health = await t.request('GET', '/healthz');
    expect(health.status).toBe(200);

    const asked = Date.now();
    const cancel = await t.request('POST', `/api/pipeline/runs/${id}/cancel`);
    expect(cancel.status, cancel.text).toBe(200);
    expect(['running', 'cancelled']).toContain(cancel.body.status);
    expect((await t.request('GET', '/healthz')).status).toBe(200);
    const run = await finished(t, id, 10_000);
    expect(Date.now() - asked).toBeLessThan(5_000);
    expect(run).toMatchObject({ status: 'cancelled', error: { title: 'Cancelled' }, rows_written: null });
    await keptOld(target);
    expect(await until(slowStatements, (n) => n === 0, 3_000), 'no statement of the cancelled run is still running').toBe(0);

    const again = await t.request('POST', `/api/pipeline/runs/${id}/cancel`);
    expect(again.status).toBe(409);
    expect(again.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(again.body).toMatchObject({ status: 409, detail: expect.stringMatching(/already ended \(cancelled\)/) });
  });

  it('ends a queued run cancelled at once, without running it', { timeout: 60_000 }, async () => {
    const target = await slowRecipe('queued_out');
    const running = await start(target.recipe);
    expect(await until(() => status(running), (s) => s === 'running', 15_000)).toBe('running');
    // One worker slot (WORKER_CONCURRENCY=1): these wait behind the running one.
    const waiting = [await start(target.recipe), await start(target.recipe)];
    for (const id of waiting) expect(await status(id)).toBe('queued');
    for (const id of waiting) {
      const cancel = await t.request('POST', `/api/pipeline/runs/${id}/cancel`);
      expect(cancel.status, cancel.text).toBe(200);
      expect(cancel.body).toMatchObject({ id, status: 'cancelled', error: { title: 'Cancelled' }, started_at: null });
    }
    // The running one goes on meanwhile, then is cancelled too; the cancelled ones never start.
    expect(await status(running)).toBe('running');
    expect((await t.request('POST', `/api/pipeline/runs/${running}/cancel`)).status).toBe(200);
    expect((await finished(t, running, 10_000)).status).toBe('cancelled');
    await sleep(500);
    for (const id of waiting) {
      const run = (await t.request('GET', `/api/pipeline/runs/${id}`)).body;
      expect(run).toMatchObject({ status: 'cancelled', started_at: null });
      expect(((await t.request('GET', `/api/pipeline/runs/${id}/logs`)).body.items as { message: string }[]).filter((l) => l.message.startsWith('reading '))).toEqual([]);
    }
    await keptOld(target);
    expect(await until(slowStatements, (n) => n === 0, 3_000)).toBe(0);
  });
});
