import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratchDatabase, DIALECTS, REPO_ROOT, tempDir, until } from '../harness/index.ts';
import { writeSlowCopier } from '../pipeline/pipeline-helpers.ts';
import { client, databaseQuery, exited, killAll, killHard, launch, serverSettings, type ServerProcess } from '../harness/server-process.ts';

/**
 * Scenarios outlive the instance running them (README, "What runs again after a crash"): a server
 * process killed (SIGKILL) while a scenario waits for its build resumes the run after the restart
 * without running the steps that ended again and without starting a second build; a dataset change
 * whose debounced trigger had not fired yet when the server died starts its run once after the restart.
 */

const FINAL = ['succeeded', 'failed', 'cancelled', 'skipped'];
const ROWS = 30_000;

describe.each(DIALECTS)('a scenario whose server process is killed (%s)', (dialect) => {
  const temp = tempDir('dp-scenario-crash-');
  const live: ServerProcess[] = [];
  let database: Awaited<ReturnType<typeof createScratchDatabase>>;
  let query: ReturnType<typeof databaseQuery>;
  let env: Record<string, string>;
  let token: string;
  let server: ServerProcess;
  let api: ReturnType<typeof client>;
  let project: number;
  let source: number;

  const restart = async () => {
    server = await launch(env, live);
    api = client(server.url, token);
  };
  const serving = async () => {
    if (exited(server)) await restart();
  };
  const run = async (id: number) => (await api('GET', `/api/pipeline/runs/${id}`)).body as Record<string, any>;
  const ended = (id: number, timeoutMs = 60_000) => until(() => run(id), (r) => FINAL.includes(r.status), timeoutMs);
  const created = async (route: string, body: unknown) => {
    const answer = await api('POST', route, body);
    expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    return answer.body.id as number;
  };
  const csvOf = (rows: number, word: string) => `id,word\n${Array.from({ length: rows }, (_, i) => `${i + 1},${word} ${i + 1}`).join('\n')}\n`;
  const load = async (dataset: number, csv: string) => {
    const loaded = await api('POST', `/api/datasets/${dataset}/data`, csv, 'text/csv');
    expect(loaded.status, JSON.stringify(loaded.body)).toBe(200);
  };

  beforeAll(async () => {
    const plugins = path.join(temp.dir, 'plugins');
    fs.mkdirSync(plugins);
    writeSlowCopier(plugins);
    database = await createScratchDatabase(dialect, temp.dir);
    query = databaseQuery(dialect, database.url);
    ({ env, token } = await serverSettings(temp.dir, database.url, [path.join(REPO_ROOT, 'manifests'), plugins]));
    await restart();
    project = await created('/api/projects', { key: 'CRASH', name: 'Crash' });
    source = await created('/api/datasets', { name: 'words', project_id: project, columns: [{ name: 'id', type: 'integer' }, { name: 'word', type: 'string' }] });
    await load(source, csvOf(ROWS, 'word'));
  }, 120_000);
  afterAll(async () => {
    await killAll(live);
    await database?.drop();
    temp.remove();
  });

  it('resumes a run killed while it waits for its build: the steps that ended are not run again, the build is not started twice', { timeout: 120_000 }, async () => {
    await serving();
    const copy = await created('/api/datasets', { name: 'copied', project_id: project, columns: [] });
    await created('/api/pipeline/recipes', { project_id: project, name: 'slow copy', type: 'slow_copy', inputs: [source], outputs: [copy], params: { delay_ms: 60 } });
    const scenario = await created('/api/pipeline/scenarios', {
      project_id: project,
      name: 'build slowly',
      steps: [
        { type: 'sql_check', name: 'before', params: { query: 'select id from words where id = 1', expect: 'non_empty' } },
        { type: 'build', name: 'copy', params: { targets: [copy], mode: 'build' } },
        { type: 'sql_check', name: 'after', params: { query: `select id from copied where id = ${ROWS}`, expect: 'non_empty' } },
      ],
    });
    const started = await api('POST', `/api/pipeline/scenarios/${scenario}/run`);
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    const runId = started.body.run.id as number;

    // Killed while the build's recipe hands rows over (the scenario's pass waits for the build).
    const copying = await until(
      async () => {
        const children = await query<{ id: number; kind: string; status: string }>('select id, kind, status from pipeline_runs where parent_run_id in (select id from pipeline_runs where parent_run_id = $1 or id = $2) order by id', [runId, runId]);
        const recipe = children.find((c) => c.kind === 'recipe' && c.status === 'running');
        const lines = recipe ? await query<{ message: string }>('select message from pipeline_run_logs where run_id = $1', [recipe.id]) : [];
        return lines.some((l) => /^wrote \d+ rows$/.test(l.message));
      },
      (seen) => seen,
      30_000,
    );
    expect(copying).toBe(true);
    const before = await run(runId);
    expect(before.steps.map((s: { status: string }) => s.status)).toEqual(['succeeded', 'waiting', 'pending']);
    await killHard(server);

    await restart();
    const done = await ended(runId);
    expect(done.status, JSON.stringify(done)).toBe('succeeded');
    expect(done.steps.map((s: { status: string }) => s.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    // The first step ended before the kill and was not run again.
    expect(done.steps[0].ended_at).toBe(before.steps[0].ended_at);
    // One build, whose recipe's run ran again (attempt 2) and wrote the rows once.
    const builds = await query<{ id: number }>("select id from pipeline_runs where parent_run_id = $1 and kind = 'job'", [runId]);
    expect(builds).toHaveLength(1);
    const copied = await api('GET', `/api/datasets/${copy}`);
    expect(copied.body).toMatchObject({ row_count: ROWS });
  });

  it('starts the run of a dataset change whose debounced trigger had not fired when the server died, once', { timeout: 120_000 }, async () => {
    await serving();
    const watched = await created('/api/datasets', { name: 'watched', project_id: project, columns: [{ name: 'id', type: 'integer' }, { name: 'word', type: 'string' }] });
    const scenario = await created('/api/pipeline/scenarios', {
      project_id: project,
      name: 'on change',
      steps: [{ type: 'sql_check', name: 'rows there', params: { query: 'select id from watched', expect: 'non_empty' } }],
      triggers: [{ type: 'dataset_changed', datasets: [watched], debounce_s: 4 }],
    });
    const runsOf = async () => (await api('GET', `/api/pipeline/runs?kind=scenario&scenario_id=${scenario}`)).body.items as Record<string, any>[];
    await load(watched, csvOf(3, 'first'));
    // The change is committed with its event; the trigger's work waits out the debounce. The server dies meanwhile.
    await until(async () => (await query<{ n: number }>("select count(*) as n from background_work where kind = 'pipeline.scenario-trigger'"))[0], (row) => Number(row.n) > 0, 10_000);
    await killHard(server);
    expect(await query<{ n: number }>('select count(*) as n from pipeline_runs where scenario_id = $1', [scenario])).toEqual([{ n: dialect === 'sqlite' ? 0 : '0' }]);

    await restart();
    const runs = await until(runsOf, (items) => items.length > 0 && items.every((r) => FINAL.includes(r.status)), 60_000);
    expect(runs).toEqual([expect.objectContaining({ trigger: 'dependency', status: 'succeeded' })]);
    // Nothing more after the window: one change, one run.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    expect(await runsOf()).toHaveLength(1);
  });
});
