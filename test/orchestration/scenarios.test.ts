import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, until, type TestKernel } from '../harness/index.ts';
import { createRecipe, emptyDataset, finished, loadDataset } from '../pipeline/pipeline-helpers.ts';
import { startWebhookReceiver } from './webhook-receiver.ts';

describe.each(DIALECTS)('scenarios (%s)', (dialect) => {
  let t: TestKernel;
  let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
  let project: number;
  let orders: number;
  let paid: number;
  let totals: number;
  let paidRecipe: number;
  let webhook: number;

  const scenario = async (body: Record<string, unknown>) => {
    const res = await t.request('POST', '/api/pipeline/scenarios', { body: { project_id: project, ...body } });
    expect(res.status, res.text).toBe(201);
    return res.body.id as number;
  };
  const run = async (scenarioId: number) => {
    const res = await t.request('POST', `/api/pipeline/scenarios/${scenarioId}/run`);
    expect(res.status, res.text).toBe(202);
    expect(res.body.run).toMatchObject({ kind: 'scenario', scenario_id: scenarioId, trigger: 'manual' });
    return finished(t, res.body.run.id, 60_000);
  };

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1' } });
    project = (await t.request('POST', '/api/projects', { body: { key: 'SCN', name: 'Scenarios' } })).body.id;
    orders = await loadDataset(t, project, 'orders', ['id:integer', 'amount:number', 'country:string'], ['1,10,FR', '2,20,FR', '3,5,DE']);
    paid = await emptyDataset(t, project, 'paid');
    totals = await emptyDataset(t, project, 'totals');
    paidRecipe = await createRecipe(t, { project_id: project, name: 'paid', type: 'sql', inputs: [orders], outputs: [paid], params: { query: 'select id, amount, country from orders where amount > 0' } });
    await createRecipe(t, { project_id: project, name: 'totals', type: 'sql', inputs: [paid], outputs: [totals], params: { query: 'select country, sum(amount) as total from paid group by country' } });
    const connector = await t.request('POST', '/api/connectors', { body: { name: 'alerts', type: 'workflow_webhook', config: { webhook_url: receiver.url } } });
    expect(connector.status, connector.text).toBe(201);
    webhook = connector.body.id;
  });
  afterAll(async () => {
    await t?.stop();
    await receiver?.close();
  });

  it('lists the built-in step types with their parameter schemas', async () => {
    const res = await t.request('GET', '/api/pipeline/step-types');
    expect(res.status).toBe(200);
    const ids = res.body.items.map((s: { id: string }) => s.id);
    expect(ids).toEqual(expect.arrayContaining(['build', 'run_job', 'run_quality_rules', 'check_schema_drift', 'capture_contract', 'sql_check', 'send_message']));
    expect(res.body.items.find((s: { id: string }) => s.id === 'check_schema_drift').params.properties.fail_on).toEqual({ enum: ['breaking', 'any', 'none'] });
  });

  it('gates the downstream build on schema drift: a column removed upstream fails the scenario before it, naming what it breaks, and reports to the webhook', async () => {
    // The flow is built and its contracts captured by a first scenario.
    const setup = await scenario({
      name: 'build and capture',
      steps: [
        { type: 'build', name: 'build all', params: { targets: [totals], mode: 'build_required' } },
        { type: 'capture_contract', params: { datasets: [paid, totals] } },
      ],
    });
    const built = await run(setup);
    expect(built.status, JSON.stringify(built)).toBe('succeeded');
    expect(built.steps.map((s: { status: string }) => s.status)).toEqual(['succeeded', 'succeeded']);
    expect(built.steps[1].output.contracts).toEqual([expect.objectContaining({ dataset_id: paid, version: 1 }), expect.objectContaining({ dataset_id: totals, version: 1 })]);
    const children = (await t.request('GET', `/api/pipeline/runs?parent_run_id=${built.id}`)).body.items;
    expect(children).toEqual([expect.objectContaining({ kind: 'job', trigger: 'scenario', status: 'succeeded', parent_run_id: built.id })]);

    // Upstream, `amount` disappears.
    expect((await t.request('PATCH', `/api/pipeline/recipes/${paidRecipe}`, { body: { params: { query: 'select id, country from orders' } } })).status).toBe(200);
    const gated = await scenario({
      name: 'gated build',
      steps: [
        { type: 'build', name: 'build paid', params: { targets: [paid] } },
        { type: 'check_schema_drift', name: 'drift gate', params: { datasets: [paid], fail_on: 'breaking' } },
        { type: 'build', name: 'build totals', params: { targets: [totals] } },
      ],
      reporters: [
        { on: 'failure', connector_id: webhook, message: 'the nightly flow stopped' },
        { on: 'success', connector_id: webhook, message: 'never sent' },
      ],
    });
    const failed = await run(gated);
    expect(failed.status).toBe('failed');
    expect(failed.error.detail).toMatch(/drift gate/);
    expect(failed.steps.map((s: { name: string; status: string }) => [s.name, s.status])).toEqual([
      ['build paid', 'succeeded'],
      ['drift gate', 'failed'],
      ['build totals', 'skipped'],
    ]);
    const [drift] = failed.steps[1].output.drift;
    expect(drift).toMatchObject({ dataset_id: paid, dataset: 'paid', status: 'breaking', contract_version: 1 });
    expect(drift.changes).toEqual([expect.objectContaining({ column: 'amount', change: 'removed', severity: 'breaking' })]);
    expect(drift.changes[0].impact.datasets).toEqual([{ dataset_id: totals, dataset: 'totals', columns: ['total'] }]);
    expect(drift.changes[0].impact.recipes).toEqual([expect.objectContaining({ name: 'totals' })]);
    // The downstream build never ran: totals is as it was.
    expect((await t.request('GET', `/api/pipeline/runs?parent_run_id=${failed.id}`)).body.items).toHaveLength(1);

    const report = await until(async () => receiver.received.find((m) => m.metadata.run_id === failed.id), (m) => m !== undefined);
    expect(report!.message).toBe('the nightly flow stopped');
    expect(report!.metadata).toMatchObject({ run_id: failed.id, scenario: 'gated build', status: 'failed', failed_step: 'drift gate' });
    expect(report!.metadata.drift[0].changes[0].impact.datasets[0].columns).toEqual(['total']);
    expect(receiver.received.filter((m) => m.metadata.run_id === failed.id)).toHaveLength(1);

    const listed = await t.request('GET', `/api/pipeline/runs?kind=scenario&scenario_id=${gated}`);
    expect(listed.body.items.map((r: { id: number }) => r.id)).toEqual([failed.id]);
  });

  it('runs sql_check steps on their answer, and goes on past a failed step that says continue_on_failure', async () => {
    const id = await scenario({
      name: 'checks',
      steps: [
        { type: 'sql_check', name: 'no negative', params: { query: 'select id from orders where amount < 0', expect: 'empty' } },
        { type: 'sql_check', name: 'has germans', params: { query: "select id from orders where country = 'DE'", expect: 'empty' }, continue_on_failure: true },
        { type: 'sql_check', name: 'has rows', params: { query: 'select id from orders', expect: 'non_empty' } },
      ],
    });
    const done = await run(id);
    expect(done.status).toBe('succeeded');
    expect(done.steps.map((s: { status: string }) => s.status)).toEqual(['succeeded', 'failed', 'succeeded']);
    expect(done.steps[1].output).toMatchObject({ row_count: 1, columns: ['id'], rows: [[3]] });
    expect(done.steps[1].error).toMatch(/expected none/);
  });

  it('fails a step whose governed query is refused, with the reason, and skips the rest', async () => {
    const id = await scenario({
      name: 'hostile',
      steps: [
        { type: 'sql_check', params: { query: "drop table orders; -- ' \" /* */", expect: 'empty' } },
        { type: 'sql_check', params: { query: 'select 1', expect: 'non_empty' } },
      ],
    });
    const done = await run(id);
    expect(done.status).toBe('failed');
    expect(done.steps.map((s: { status: string }) => s.status)).toEqual(['failed', 'skipped']);
    expect(done.steps[0].error).toBeTruthy();
    expect((await t.request('GET', `/api/datasets/${orders}`)).status).toBe(200);
  });

  it('names each bad input', async () => {
    const bad = async (body: Record<string, unknown>, status: number, path: string) => {
      const res = await t.request('POST', '/api/pipeline/scenarios', { body: { project_id: project, name: 'bad', steps: [{ type: 'sql_check', params: { query: 'select 1', expect: 'empty' } }], ...body } });
      expect(res.status, `${JSON.stringify(body)}: ${res.text}`).toBe(status);
      expect(res.body.errors?.map((e: { path: string }) => e.path), res.text).toContain(path);
    };
    await bad({ steps: [{ type: 'sql_check', params: { query: 'select 1', expect: 'empty' } }, { type: 'nope' }] }, 422, 'body.steps.1.type');
    await bad({ steps: [{ type: 'check_schema_drift', params: { datasets: [orders], fail_on: 'sometimes' } }] }, 400, 'body.steps.0.params.fail_on');
    await bad({ steps: [{ type: 'check_schema_drift', params: {} }] }, 400, 'body.steps.0.params.datasets');
    await bad({ steps: [{ type: 'build', params: { targets: ["1' or '1'='1"] } }] }, 400, 'body.steps.0.params.targets.0');
    await bad({ steps: [{ type: 'sql_check', params: { query: 'select 1', expect: 'empty', extra: 1 } }] }, 400, 'body.steps.0.params.extra');
    await bad({ steps: [] }, 400, 'body.steps');
    await bad({ steps: 'select 1' }, 400, 'body.steps');
    await bad({ name: 'a\u0000b' }, 400, 'body.name');
    await bad({ name: 'x'.repeat(100_000) }, 400, 'body.name');
    await bad({ project_id: 999_999 }, 422, 'body.project_id');
    await bad({ triggers: [{ type: 'dataset_changed', datasets: [999_999] }] }, 422, 'body.triggers.0.datasets.0');
    await bad({ triggers: [{ type: 'hourly' }] }, 400, 'body.triggers.0.type');
    await bad({ reporters: [{ on: 'sometimes', connector_id: webhook, message: 'x' }] }, 400, 'body.reporters.0.on');
    await bad({ reporters: [{ on: 'failure', connector_id: 'x', message: 'x' }] }, 400, 'body.reporters.0.connector_id');
    const patch = await t.request('PATCH', `/api/pipeline/scenarios/${await scenario({ name: 'patched', steps: [{ type: 'sql_check', params: { query: 'select 1', expect: 'non_empty' } }] })}`, { body: { steps: [{ type: 'nope' }] } });
    expect(patch.status).toBe(422);
    expect(patch.body.errors[0].path).toBe('body.steps.0.type');
  });

  it('creates, lists, reads, changes and deletes scenarios; hostile names are kept as written', async () => {
    const name = `it's "quoted" -- /* both */ ; drop table pipeline_scenarios`;
    const id = await scenario({ name, steps: [{ type: 'sql_check', params: { query: 'select 1', expect: 'non_empty' } }], triggers: [{ type: 'manual' }] });
    const got = await t.request('GET', `/api/pipeline/scenarios/${id}`);
    expect(got.body).toMatchObject({ id, project_id: project, name, steps: [{ type: 'sql_check', name: 'sql_check', continue_on_failure: false }], triggers: [{ type: 'manual' }], reporters: [] });
    expect((await t.request('GET', `/api/pipeline/scenarios?project_id=${project}`)).body.items.map((s: { id: number }) => s.id)).toContain(id);
    expect((await t.request('POST', '/api/pipeline/scenarios', { body: { project_id: project, name, steps: [{ type: 'sql_check', params: { query: 'select 1', expect: 'empty' } }] } })).status).toBe(409);
    const changed = await t.request('PATCH', `/api/pipeline/scenarios/${id}`, { body: { name: 'renamed', reporters: [{ on: 'always', connector_id: webhook, message: 'done' }] } });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body).toMatchObject({ name: 'renamed', reporters: [{ on: 'always', connector_id: webhook, message: 'done' }] });
    const done = await run(id);
    expect(done.status).toBe('succeeded');
    const report = await until(async () => receiver.received.find((m) => m.metadata.run_id === done.id), (m) => m !== undefined);
    expect(report!.metadata).toMatchObject({ scenario: 'renamed', status: 'succeeded', failed_step: null, drift: [] });
    expect((await t.request('DELETE', `/api/pipeline/scenarios/${id}`)).status).toBe(204);
    expect((await t.request('GET', `/api/pipeline/scenarios/${id}`)).status).toBe(404);
    expect((await t.request('POST', `/api/pipeline/scenarios/${id}/run`)).status).toBe(404);
    // Its runs stay.
    expect((await t.request('GET', `/api/pipeline/runs/${done.id}`)).body.steps).toHaveLength(1);
  });

  it('says api for a run started with a personal access token, and keeps a project holding a scenario from being deleted', async () => {
    const other = (await t.request('POST', '/api/projects', { body: { key: 'SCN2', name: 'Scenarios only' } })).body.id;
    const res = await t.request('POST', '/api/pipeline/scenarios', { body: { project_id: other, name: 'alone', steps: [{ type: 'sql_check', params: { query: 'select 1', expect: 'non_empty' } }] } });
    const minted = await t.request('POST', '/api/auth/tokens', { body: { name: 'scenario runner' } });
    expect(minted.status, minted.text).toBe(201);
    const started = await t.request('POST', `/api/pipeline/scenarios/${res.body.id}/run`, { token: minted.body.token });
    expect(started.body.run).toMatchObject({ kind: 'scenario', trigger: 'api' });
    await finished(t, started.body.run.id);
    const refused = await t.request('DELETE', `/api/projects/${other}`);
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toMatch(/1 scenario/);
    expect((await t.request('DELETE', `/api/pipeline/scenarios/${res.body.id}`)).status).toBe(204);
    expect((await t.request('DELETE', `/api/projects/${other}`)).status).toBe(204);
  });

  it('starts one run for a burst of changes to a watched dataset, after the debounce', async () => {
    const id = await scenario({ name: 'on change', steps: [{ type: 'sql_check', params: { query: 'select 1', expect: 'non_empty' } }], triggers: [{ type: 'dataset_changed', datasets: [orders], debounce_s: 2 }] });
    const firstChange = Date.now();
    for (let i = 0; i < 3; i++) {
      const append = await t.request('POST', `/api/datasets/${orders}/data?mode=append`, { body: `id,amount,country\n${10 + i},1,IT\n`, headers: { 'content-type': 'text/csv' } });
      expect(append.status, append.text).toBe(200);
    }
    const runs = await until(async () => (await t.request('GET', `/api/pipeline/runs?scenario_id=${id}`)).body.items, (items: { id: number }[]) => items.length > 0, 20_000);
    const done = await finished(t, runs[0].id);
    expect(done).toMatchObject({ kind: 'scenario', trigger: 'dependency', status: 'succeeded' });
    // Not before the window closed (the database clock may round to the millisecond).
    expect(Date.parse(done.created_at) - firstChange).toBeGreaterThanOrEqual(1_900);
    await new Promise((resolve) => setTimeout(resolve, 2500));
    expect((await t.request('GET', `/api/pipeline/runs?scenario_id=${id}`)).body.items).toHaveLength(1);
    // A later change opens a new window: one more run.
    await t.request('POST', `/api/datasets/${orders}/data?mode=append`, { body: 'id,amount,country\n20,1,IT\n', headers: { 'content-type': 'text/csv' } });
    await until(async () => (await t.request('GET', `/api/pipeline/runs?scenario_id=${id}`)).body.items, (items: unknown[]) => items.length === 2, 20_000);
  });

  it("keeps another organization's scenarios out of reach", async () => {
    const id = await scenario({ name: 'private', steps: [{ type: 'sql_check', params: { query: 'select 1', expect: 'non_empty' } }] });
    const b = await t.outsider('scenario-outsider');
    const as = { token: b.token };
    expect((await t.request('GET', `/api/pipeline/scenarios/${id}`, as)).status).toBe(404);
    expect((await t.request('PATCH', `/api/pipeline/scenarios/${id}`, { ...as, body: { name: 'mine' } })).status).toBe(404);
    expect((await t.request('POST', `/api/pipeline/scenarios/${id}/run`, as)).status).toBe(404);
    expect((await t.request('DELETE', `/api/pipeline/scenarios/${id}`, as)).status).toBe(404);
    expect((await t.request('GET', '/api/pipeline/scenarios', as)).body.items).toEqual([]);
    const bProject = (await t.request('POST', '/api/projects', { ...as, body: { key: 'BSC', name: 'B' } })).body.id;
    const sneaky = await t.request('POST', '/api/pipeline/scenarios', { ...as, body: { project_id: bProject, name: 'x', steps: [{ type: 'sql_check', params: { query: 'select 1', expect: 'empty' } }], triggers: [{ type: 'dataset_changed', datasets: [orders] }] } });
    expect(sneaky.status).toBe(422);
    expect((await t.request('GET', `/api/pipeline/scenarios/${id}`)).body.name).toBe('private');
  });
});
