import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { createReadmeOrders } from '../harness/readme-orders.ts';
import { finished } from './pipeline-helpers.ts';

/** The README's pipeline walkthrough, step by step, with the same requests and the ids it names. */
describe.each(DIALECTS)("the README's pipeline walkthrough (%s)", (dialect) => {
  let t: TestKernel;
  const post = (path: string, body?: unknown) => t.request('POST', path, body === undefined ? {} : { body });

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    await createReadmeOrders(t);
  });
  afterAll(async () => t?.stop());

  it('builds a three-recipe flow with a job, lists its runs and answers its lineage', async () => {
    for (const [i, name] of ['paid_orders', 'country_totals', 'top_countries'].entries()) expect((await post('/api/datasets', { name, project_id: 1 })).body.id).toBe(i + 2);
    let res = await post('/api/pipeline/recipes', { project_id: 1, name: 'paid only', type: 'filter', inputs: [1], outputs: [2], params: { conditions: ['paid:eq:true'] } });
    expect([res.status, res.body.id]).toEqual([201, 1]);
    res = await post('/api/pipeline/recipes', { project_id: 1, name: 'per country', type: 'group', inputs: [2], outputs: [3], params: { keys: ['country'], aggregations: [{ fn: 'count', as: 'orders' }, { column: 'amount', fn: 'sum', as: 'total' }] } });
    expect([res.status, res.body.id], res.text).toEqual([201, 2]);
    res = await post('/api/pipeline/recipes', { project_id: 1, name: 'top countries', type: 'sql', inputs: [3], outputs: [4], params: { query: 'select country, total from country_totals where total > 5 order by total desc' } });
    expect([res.status, res.body.id], res.text).toEqual([201, 3]);
    const schema = await t.request('GET', '/api/pipeline/recipes/3/schema');
    expect(schema.body.outputs[0].columns).toEqual([
      { name: 'country', type: 'string', pii: false },
      { name: 'total', type: 'number', pii: false },
    ]);

    res = await post('/api/pipeline/jobs', { project_id: 1, name: 'nightly', targets: [4], mode: 'build_required' });
    expect([res.status, res.body.id]).toEqual([201, 1]);
    const started = await post('/api/pipeline/jobs/1/run');
    expect(started.status).toBe(202);
    const run = await finished(t, started.body.run.id);
    expect(run).toMatchObject({ kind: 'job', status: 'succeeded' });
    const children = (await t.request('GET', `/api/pipeline/runs?parent_run_id=${run.id}`)).body.items;
    expect(children.map((c: { recipe_id: number; status: string }) => `${c.recipe_id}:${c.status}`).sort()).toEqual(['1:succeeded', '2:succeeded', '3:succeeded']);
    expect((await t.request('GET', '/api/pipeline/runs?status=failed,cancelled&since=2026-01-01T00:00:00Z')).body.items).toEqual([]);
    const logs = (await t.request('GET', `/api/pipeline/runs/${children[0].id}/logs`)).body.items;
    expect(logs.at(-1).message).toMatch(/^succeeded: \d+ rows written$/);
    expect((await t.request('GET', '/api/datasets/4/rows')).body.rows).toEqual([
      { country: 'FR', total: 10.5 },
      { country: 'IT', total: 7 },
    ]);
    const flow = (await t.request('GET', '/api/pipeline/flows/1')).body;
    expect(flow.edges).toHaveLength(6);
    const upstream = (await t.request('GET', '/api/lineage/datasets/4?direction=upstream')).body;
    expect(upstream.nodes.filter((n: { kind: string }) => n.kind === 'dataset').map((n: { ref_id: number }) => n.ref_id).sort()).toEqual([1, 2, 3, 4]);
    const total = (await t.request('GET', '/api/lineage/datasets/4/columns/total?direction=upstream')).body.items;
    expect(total.map((i: { dataset: string; column: string; transformation: string }) => `${i.dataset}.${i.column}:${i.transformation}`)).toEqual(['country_totals.total:identity', 'paid_orders.amount:aggregated', 'orders.amount:identity']);
    const impact = (await t.request('GET', '/api/lineage/datasets/1/impact?columns=amount')).body;
    expect(impact.datasets.map((d: { dataset: string; columns: string[] }) => `${d.dataset}:${d.columns.join(',')}`)).toEqual(['paid_orders:amount', 'country_totals:total', 'top_countries:total']);
    expect(impact.jobs.map((j: { name: string }) => j.name)).toEqual(['nightly']);
  });
});
