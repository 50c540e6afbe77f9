import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, until, type TestKernel } from '../harness/index.ts';
import { createRecipe, emptyDataset, finished, loadDataset } from '../pipeline/pipeline-helpers.ts';

/**
 * A third-party plugin, in a folder outside the repository, adding step types (and a recipe type
 * whose handler never ends, to have a build to cancel) through the SDK.
 */
function writeFixture(root: string) {
  fs.writeFileSync(path.join(root, 'package.json'), JSON.stringify({ type: 'module' }));
  fs.writeFileSync(
    path.join(root, 'index.ts'),
    `import fs from 'node:fs';
import { definePlugin } from 'data-platform/plugin-api';
import { recipeType, recipeTypes, stepType, stepTypes } from 'data-platform/plugins/pipeline';

export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    ctx.contribute(stepTypes, stepType<{ word: string }>({
      id: 'echo',
      description: 'Answers its word',
      params: { type: 'object', properties: { word: { type: 'string', maxLength: 20 } }, required: ['word'], additionalProperties: false },
      run: async (context) => ({ status: 'succeeded', output: { word: context.params.word, step: context.step.name, run_id: context.run.id } }),
    }));
    ctx.contribute(stepTypes, stepType({
      id: 'hang',
      params: { type: 'object' },
      run: (context) => new Promise((_resolve, reject) => context.signal.addEventListener('abort', () => reject(context.signal.reason))),
    }));
    ctx.contribute(stepTypes, stepType({
      id: 'boom',
      params: { type: 'object' },
      run: async () => { throw new Error('the fixture step blew up'); },
    }));
    // Hangs the first time (leaving a mark), succeeds when run again: a step cut short by its instance stopping.
    ctx.contribute(stepTypes, stepType<{ mark: string }>({
      id: 'second_time',
      params: { type: 'object', properties: { mark: { type: 'string' } }, required: ['mark'] },
      run: async (context) => {
        if (fs.existsSync(context.params.mark)) return { status: 'succeeded', output: { resumed: true } };
        fs.writeFileSync(context.params.mark, 'started');
        return new Promise((_resolve, reject) => context.signal.addEventListener('abort', () => reject(context.signal.reason)));
      },
    }));
    ctx.contribute(recipeTypes, recipeType({ id: 'endless', handler: 'handlers:endless', params: { type: 'object' } }));
  },
});
`,
  );
  fs.writeFileSync(path.join(root, 'handlers.ts'), 'export async function endless() {\n  await new Promise(() => undefined);\n}\n');
  fs.writeFileSync(path.join(root, 'fixture_steps.json'), JSON.stringify({ id: 'fixture_steps', version: '1.0.0', kind: 'extension', entry: './index.ts', depends_on: ['pipeline'] }));
}

describe.each(DIALECTS)('scenario step types (%s)', (dialect) => {
  let t: TestKernel;
  const folder = tempDir('dp-steps-');
  let project: number;
  let orders: number;

  const scenario = async (name: string, steps: unknown[]) => {
    const res = await t.request('POST', '/api/pipeline/scenarios', { body: { project_id: project, name, steps } });
    expect(res.status, res.text).toBe(201);
    return res.body.id as number;
  };
  const start = async (scenarioId: number) => {
    const res = await t.request('POST', `/api/pipeline/scenarios/${scenarioId}/run`);
    expect(res.status, res.text).toBe(202);
    return res.body.run.id as number;
  };
  const statuses = (run: Record<string, any>) => run.steps.map((s: { status: string }) => s.status);

  beforeAll(async () => {
    writeFixture(folder.dir);
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), folder.dir] });
    project = (await t.request('POST', '/api/projects', { body: { key: 'STEPS', name: 'Steps' } })).body.id;
    orders = await loadDataset(t, project, 'orders', ['id:integer', 'email:string'], ['1,a@example.test', '2,', '3,c@example.test']);
  });
  afterAll(async () => {
    await t?.stop();
    folder.remove();
  });

  it("runs a plugin's step type and keeps its output on the run", async () => {
    const types = (await t.request('GET', '/api/pipeline/step-types')).body.items;
    expect(types).toEqual(expect.arrayContaining([{ id: 'echo', plugin_id: 'fixture_steps', description: 'Answers its word', params: expect.objectContaining({ required: ['word'] }) }]));
    const bad = await t.request('POST', '/api/pipeline/scenarios', { body: { project_id: project, name: 'bad echo', steps: [{ type: 'echo', params: { word: 'x'.repeat(21) } }] } });
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0].path).toBe('body.steps.0.params.word');
    const runId = await start(await scenario('echoes', [{ type: 'echo', name: 'first', params: { word: "it's -- /* */" } }, { type: 'boom' }, { type: 'echo', params: { word: 'never' } }]));
    const run = await finished(t, runId);
    expect(run.status).toBe('failed');
    expect(statuses(run)).toEqual(['succeeded', 'failed', 'skipped']);
    expect(run.steps[0]).toMatchObject({ name: 'first', type: 'echo', output: { word: "it's -- /* */", step: 'first', run_id: runId }, error: null });
    expect(run.steps[0].started_at).toBeTruthy();
    expect(run.steps[0].ended_at).toBeTruthy();
    expect(run.steps[1].error).toBe('the fixture step blew up');
    expect(run.steps[2]).toMatchObject({ status: 'skipped', started_at: null, output: null });
    const logs = (await t.request('GET', `/api/pipeline/runs/${runId}/logs`)).body.items.map((l: { message: string }) => l.message);
    expect(logs.some((m: string) => /step 1 "boom" failed: the fixture step blew up/.test(m))).toBe(true);
  });

  it('offers no step type of a plugin disabled in the organization', async () => {
    const b = await t.outsider('steps-b');
    const inB = (more: Record<string, unknown> = {}) => ({ ...more, token: b.token, headers: { 'X-Org-Id': String(b.orgId) } });
    expect((await t.request('PUT', `/api/plugins/fixture_steps/organizations/${b.orgId}`, { headers: { 'X-Org-Id': String(b.orgId) }, body: { enabled: false } })).status).toBe(200);
    const listed = (await t.request('GET', '/api/pipeline/step-types', inB())).body.items.map((s: { id: string }) => s.id);
    expect(listed).not.toContain('echo');
    expect(listed).toContain('sql_check');
    const projectB = (await t.request('POST', '/api/projects', inB({ body: { key: 'SB', name: 'Steps B' } }))).body.id;
    const refused = await t.request('POST', '/api/pipeline/scenarios', inB({ body: { project_id: projectB, name: 'echo', steps: [{ type: 'echo', params: { word: 'hi' } }] } }));
    expect(refused.status).toBe(422);
    expect(refused.body.errors).toEqual([{ path: 'body.steps.0.type', message: 'unknown step type echo' }]);
  });

  it('cancelling a scenario run stops its running step and skips the rest', async () => {
    const runId = await start(await scenario('hangs', [{ type: 'hang' }, { type: 'echo', params: { word: 'never' } }]));
    await until(async () => (await t.request('GET', `/api/pipeline/runs/${runId}`)).body, (r) => r.steps?.[0].status === 'running');
    const cancelled = await t.request('POST', `/api/pipeline/runs/${runId}/cancel`);
    expect(cancelled.status, cancelled.text).toBe(200);
    const run = await finished(t, runId);
    expect(run.status).toBe('cancelled');
    expect(statuses(run)).toEqual(['cancelled', 'skipped']);
    expect((await t.request('POST', `/api/pipeline/runs/${runId}/cancel`)).status).toBe(409);
  });

  it("cancelling a scenario run waiting for its build cancels the build and the build's recipe run", async () => {
    const out = await emptyDataset(t, project, 'endless_out');
    await createRecipe(t, { project_id: project, name: 'endless', type: 'endless', inputs: [orders], outputs: [out], params: {} });
    const runId = await start(await scenario('endless build', [{ type: 'build', params: { targets: [out] } }, { type: 'echo', params: { word: 'never' } }]));
    const build = await until(async () => (await t.request('GET', `/api/pipeline/runs?parent_run_id=${runId}`)).body.items[0], (r) => r !== undefined);
    await until(async () => (await t.request('GET', `/api/pipeline/runs?parent_run_id=${build.id}`)).body.items[0], (r) => r?.status === 'running');
    expect((await t.request('GET', `/api/pipeline/runs/${runId}`)).body.steps[0]).toMatchObject({ status: 'waiting', output: { run_id: build.id } });
    expect((await t.request('POST', `/api/pipeline/runs/${runId}/cancel`)).status).toBe(200);
    expect(statuses(await finished(t, runId))).toEqual(['cancelled', 'skipped']);
    expect((await finished(t, build.id)).status).toBe('cancelled');
    const recipeRun = (await t.request('GET', `/api/pipeline/runs?parent_run_id=${build.id}`)).body.items[0];
    expect((await finished(t, recipeRun.id)).status).toBe('cancelled');
  });

  it("runs a saved job as a child build (run_job), and the datasets' quality rules failing by severity (run_quality_rules)", async () => {
    const out = await emptyDataset(t, project, 'emails');
    await createRecipe(t, { project_id: project, name: 'emails', type: 'sql', inputs: [orders], outputs: [out], params: { query: 'select id, email from orders' } });
    const job = (await t.request('POST', '/api/pipeline/jobs', { body: { project_id: project, name: 'emails', targets: [out] } })).body.id;
    const rule = await t.request('POST', '/api/data-quality/rules', { body: { dataset_id: orders, name: 'email present', type: 'not_null', params: { column: 'email' }, severity: 'warn' } });
    expect(rule.status, rule.text).toBe(201);
    const lenient = await finished(
      t,
      await start(
        await scenario('job then rules', [
          { type: 'run_job', params: { job_id: job } },
          { type: 'run_quality_rules', params: { datasets: [orders], fail_on: 'error' } },
        ]),
      ),
    );
    expect(lenient.status, JSON.stringify(lenient)).toBe('succeeded');
    const [build] = (await t.request('GET', `/api/pipeline/runs?parent_run_id=${lenient.id}`)).body.items;
    expect(build).toMatchObject({ kind: 'job', job_id: job, trigger: 'scenario', status: 'succeeded' });
    expect(lenient.steps[0].output).toMatchObject({ run_id: build.id, status: 'succeeded', rows_written: 3 });
    expect(lenient.steps[1].output).toEqual({ rules: [{ dataset_id: orders, rule_id: rule.body.id, rule: 'email present', severity: 'warn', status: 'failed' }], failing: 0 });

    const strict = await finished(t, await start(await scenario('strict rules', [{ type: 'run_quality_rules', params: { datasets: [orders], fail_on: 'warn' } }])));
    expect(strict.status).toBe('failed');
    expect(strict.steps[0].error).toMatch(/"email present" \(warn, failed\)/);
    const missing = await finished(t, await start(await scenario('missing job', [{ type: 'run_job', params: { job_id: 999_999 } }])));
    expect(missing.steps[0]).toMatchObject({ status: 'failed', error: 'no job 999999 in this organization' });
  });

  it('check_schema_drift: a dataset without a contract fails only with require_contract; additive drift fails only with fail_on any', async () => {
    const loose = await finished(t, await start(await scenario('no contract', [{ type: 'check_schema_drift', params: { datasets: [orders] } }])));
    expect(loose.status).toBe('succeeded');
    expect(loose.steps[0].output.drift[0]).toMatchObject({ dataset_id: orders, status: 'no-contract', changes: [] });
    const strict = await finished(t, await start(await scenario('contract required', [{ type: 'check_schema_drift', params: { datasets: [orders], require_contract: true } }])));
    expect(strict.steps[0]).toMatchObject({ status: 'failed', error: expect.stringMatching(/"orders" \(no contract\)/) });

    const wide = await loadDataset(t, project, 'wide', ['id:integer'], ['1']);
    await finished(t, await start(await scenario('capture wide', [{ type: 'capture_contract', params: { datasets: [wide] } }])));
    const upload = await t.request('POST', `/api/datasets/${wide}/data?mode=replace`, { body: 'id,extra\n1,x\n', headers: { 'content-type': 'text/csv' } });
    expect(upload.status, upload.text).toBe(200);
    const checks = await finished(
      t,
      await start(
        await scenario('additive', [
          { type: 'check_schema_drift', name: 'breaking only', params: { datasets: [wide], fail_on: 'breaking' } },
          { type: 'check_schema_drift', name: 'records only', params: { datasets: [wide], fail_on: 'none' } },
          { type: 'check_schema_drift', name: 'any', params: { datasets: [wide], fail_on: 'any' } },
        ]),
      ),
    );
    expect(statuses(checks)).toEqual(['succeeded', 'succeeded', 'failed']);
    expect(checks.steps[2].output.drift[0]).toMatchObject({ status: 'additive', changes: [{ column: 'extra', change: 'added', severity: 'additive', impact: null }] });
  });

  it('resumes at the step that was running when its instance stopped, on another instance, without running the steps before it again', async () => {
    // Stopping, it hands its running work back after SHUTDOWN_TIMEOUT_MS (an instance that died instead: after its lease).
    const k = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), folder.dir], env: { SHUTDOWN_TIMEOUT_MS: '500' } });
    try {
      const projectK = (await k.request('POST', '/api/projects', { body: { key: 'RES', name: 'Resume' } })).body.id;
      const created = await k.request('POST', '/api/pipeline/scenarios', {
        body: { project_id: projectK, name: 'resumable', steps: [{ type: 'echo', params: { word: 'one' } }, { type: 'second_time', params: { mark: path.join(folder.dir, `mark-${dialect}`) } }, { type: 'echo', params: { word: 'two' } }] },
      });
      const runId = (await k.request('POST', `/api/pipeline/scenarios/${created.body.id}/run`)).body.run.id;
      const before = await until(async () => (await k.request('GET', `/api/pipeline/runs/${runId}`)).body, (r) => r.steps[1].status === 'running');
      // Another instance, started once the step runs on the first: it takes the work over.
      const peer = await k.peer();
      await k.kernel.stop();
      const run = await until(async () => (await peer.request('GET', `/api/pipeline/runs/${runId}`)).body, (r) => ['succeeded', 'failed'].includes(r.status), 90_000);
      expect(run.status, JSON.stringify(run)).toBe('succeeded');
      expect(run.steps.map((s: { status: string }) => s.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
      expect(run.steps[0]).toEqual(before.steps[0]);
      expect(run.steps[1].output).toEqual({ resumed: true });
    } finally {
      await k.stop().catch(() => undefined);
    }
  }, 150_000);

  it('a schedule targets a scenario: its fires start runs with trigger schedule and the schedule id', async () => {
    const id = await scenario('every second', [{ type: 'echo', params: { word: 'tick' } }]);
    const schedule = await t.request('POST', '/api/scheduler/schedules', { body: { project_id: project, name: 'ticks', target: { scenario_id: id }, cron: '* * * * * *' } });
    expect(schedule.status, schedule.text).toBe(201);
    const [run] = await until(async () => (await t.request('GET', `/api/pipeline/runs?kind=scenario&scenario_id=${id}`)).body.items, (items: { id: number }[]) => items.length > 0, 20_000);
    expect(run).toMatchObject({ kind: 'scenario', scenario_id: id, trigger: 'schedule', schedule_id: schedule.body.id });
    expect((await t.request('GET', `/api/pipeline/runs?schedule_id=${schedule.body.id}`)).body.items.every((r: { scenario_id: number }) => r.scenario_id === id)).toBe(true);
    expect((await t.request('DELETE', `/api/scheduler/schedules/${schedule.body.id}`)).status).toBe(204);
    expect((await finished(t, run.id)).status).toBe('succeeded');
  });
});
