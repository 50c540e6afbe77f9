import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, until, type TestKernel } from '../harness/index.ts';
import { finished } from '../pipeline/pipeline-helpers.ts';
import { startWebhookReceiver } from './webhook-receiver.ts';

/**
 * The README's scenario walkthrough, with the same requests and the ids it names, after the data
 * and pipeline walkthroughs (project 1, datasets 1-4, recipes 1-3, job 1, built). The webhook is a
 * loopback receiver here.
 */
describe.each(DIALECTS)("the README's scenario walkthrough (%s)", (dialect) => {
  let t: TestKernel;
  let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
  const post = (path: string, body?: unknown) => t.request('POST', path, body === undefined ? {} : { body });

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1' } });
    expect((await post('/api/projects', { key: 'SALES', name: 'Sales' })).body.id).toBe(1);
    expect((await post('/api/datasets', { name: 'orders', project_id: 1 })).body.id).toBe(1);
    const csv = 'id,amount,country,paid,day\n1,10.5,FR,true,2024-01-02\n2,20,DE,false,2024-01-03\n';
    expect((await t.request('POST', '/api/datasets/1/data?mode=replace', { body: csv, headers: { 'content-type': 'text/csv' } })).status).toBe(200);
    for (const name of ['paid_orders', 'country_totals', 'top_countries']) await post('/api/datasets', { name, project_id: 1 });
    await post('/api/pipeline/recipes', { project_id: 1, name: 'paid only', type: 'filter', inputs: [1], outputs: [2], params: { conditions: ['paid:eq:true'] } });
    await post('/api/pipeline/recipes', { project_id: 1, name: 'per country', type: 'group', inputs: [2], outputs: [3], params: { keys: ['country'], aggregations: [{ fn: 'count', as: 'orders' }, { column: 'amount', fn: 'sum', as: 'total' }] } });
    await post('/api/pipeline/recipes', { project_id: 1, name: 'top countries', type: 'sql', inputs: [3], outputs: [4], params: { query: 'select country, total from country_totals where total > 5 order by total desc' } });
    await post('/api/pipeline/jobs', { project_id: 1, name: 'nightly', targets: [4], mode: 'build_required' });
    expect((await finished(t, (await post('/api/pipeline/jobs/1/run')).body.run.id)).status).toBe('succeeded');
  });
  afterAll(async () => {
    await t?.stop();
    await receiver?.close();
  });

  it('gates the nightly build on drift and reports the failure to the webhook', async () => {
    expect((await t.request('GET', '/api/pipeline/step-types')).body.items.length).toBeGreaterThanOrEqual(7);
    expect((await post('/api/datasets/2/contract')).status).toBe(201);
    const hook = await post('/api/connectors', { name: 'alerts', type: 'workflow_webhook', config: { webhook_url: receiver.url } });
    expect(hook.status, hook.text).toBe(201);
    const scenario = await post('/api/pipeline/scenarios', {
      project_id: 1,
      name: 'gated nightly',
      steps: [
        { type: 'build', name: 'build paid', params: { targets: [2] } },
        { type: 'check_schema_drift', name: 'drift gate', params: { datasets: [2], fail_on: 'breaking' } },
        { type: 'sql_check', name: 'no negative totals', params: { query: 'select country from country_totals where total < 0', expect: 'empty' } },
        { type: 'build', name: 'build the rest', params: { targets: [4], mode: 'build_required' } },
      ],
      triggers: [{ type: 'dataset_changed', datasets: [1], debounce_s: 300 }],
      reporters: [{ on: 'failure', connector_id: hook.body.id, message: 'the nightly flow stopped' }],
    });
    expect(scenario.status, scenario.text).toBe(201);
    const first = await finished(t, (await post(`/api/pipeline/scenarios/${scenario.body.id}/run`)).body.run.id);
    expect(first.steps.map((s: { status: string }) => s.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
    expect((await t.request('GET', `/api/pipeline/runs?parent_run_id=${first.id}`)).body.items.map((r: { trigger: string }) => r.trigger)).toEqual(['scenario', 'scenario']);

    const patched = await t.request('PATCH', '/api/pipeline/recipes/1', { body: { type: 'sql', params: { query: 'select id, country, paid, day from orders where paid' } } });
    expect(patched.status, patched.text).toBe(200);
    const totalsBefore = (await t.request('GET', '/api/datasets/3')).body.version;
    const second = await finished(t, (await post(`/api/pipeline/scenarios/${scenario.body.id}/run`)).body.run.id);
    expect(second.status).toBe('failed');
    expect(second.steps.map((s: { name: string; status: string }) => `${s.name}:${s.status}`)).toEqual(['build paid:succeeded', 'drift gate:failed', 'no negative totals:skipped', 'build the rest:skipped']);
    const [drift] = second.steps[1].output.drift;
    expect(drift.changes).toEqual([expect.objectContaining({ column: 'amount', change: 'removed', severity: 'breaking' })]);
    expect(drift.changes[0].impact.datasets.map((d: { dataset: string; columns: string[] }) => `${d.dataset}.${d.columns.join(',')}`)).toEqual(['country_totals.total', 'top_countries.total']);
    expect(drift.changes[0].impact.consumers).toEqual([expect.objectContaining({ kind: 'job', name: 'nightly' })]);
    expect((await t.request('GET', '/api/datasets/3')).body.version).toBe(totalsBefore);
    const report = await until(async () => receiver.received.find((m) => m.metadata.run_id === second.id), (m) => m !== undefined);
    expect(report!.metadata).toMatchObject({ scenario: 'gated nightly', status: 'failed', failed_step: 'drift gate' });
    expect((await t.request('GET', `/api/pipeline/runs?kind=scenario&scenario_id=${scenario.body.id}`)).body.items).toHaveLength(2);

    const schedule = await post('/api/scheduler/schedules', { project_id: 1, name: 'gated nightly', target: { scenario_id: scenario.body.id }, cron: '0 2 * * *', timezone: 'Europe/Paris' });
    expect(schedule.status, schedule.text).toBe(201);
    expect((await post(`/api/pipeline/runs/${second.id}/cancel`)).status).toBe(409);
  });
});
