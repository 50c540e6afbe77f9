import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { createReadmeOrders } from '../harness/readme-orders.ts';
import { finished } from '../pipeline/pipeline-helpers.ts';

/** The README's model registry and API Services walkthroughs, step by step, with the same requests and the ids they name. */
describe.each(DIALECTS)("the README's serving walkthrough (%s)", (dialect) => {
  let t: TestKernel;
  const post = (path: string, body?: unknown) => t.request('POST', path, body === undefined ? {} : { body });
  const call = (key: string, path: string, body?: unknown) =>
    t.request(body === undefined ? 'GET' : 'POST', `/api/service/orders/${path}`, { token: null, headers: { 'x-api-key': key }, ...(body === undefined ? {} : { body }) });

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    await createReadmeOrders(t);
  });
  afterAll(async () => t?.stop());

  it('trains a model, publishes a service with a sql, a lookup and a model endpoint, mints a key and calls each', async () => {
    const trained = await post('/api/registry/models', {
      project_id: 1,
      name: 'amount',
      dataset_id: 1,
      target: 'amount',
      features: ['country', 'paid'],
      task: 'regression',
      algorithm: 'random_forest',
      params: { n_estimators: 50 },
      test_ratio: 0.2,
      seed: 42,
    });
    expect(trained.status, trained.text).toBe(202);
    expect(trained.body.model.id).toBe(1);
    expect(await finished(t, trained.body.run.id)).toMatchObject({ status: 'succeeded' });

    const created = await post('/api/publishing/api-services', {
      project_id: 1,
      name: 'Orders API',
      key: 'orders',
      endpoints: [
        { name: 'totals', kind: 'sql', config: { query: 'select country, sum(amount) as total from orders where amount > $1 group by country', params: [{ name: 'min_amount', type: 'number', default: 0 }], max_rows: 100 } },
        { name: 'by-country', kind: 'lookup', config: { dataset_id: 1, keys: ['country'], columns: ['id', 'amount', 'day'], on_multiple: 'all', max_rows_per_key: 50, cache_ttl_s: 60 } },
        { name: 'amount', kind: 'model', config: { model_id: 1 } },
      ],
    });
    expect(created.status, created.text).toBe(201);
    const svc = created.body.id;
    const dryRun = await post(`/api/publishing/api-services/${svc}/endpoints/totals/test`, { query: { min_amount: '5' } });
    expect(dryRun.status, dryRun.text).toBe(200);
    expect(dryRun.body.result.row_count).toBe(3);
    expect((await post(`/api/publishing/api-services/${svc}/publish`)).status).toBe(200);
    const minted = await post(`/api/publishing/api-services/${svc}/keys`, { name: 'partner', allowed_endpoints: null, fixed_params: {}, rate_limit_per_min: 600, expires_at: null });
    expect(minted.status, minted.text).toBe(201);
    const key = minted.body.key as string;

    const totals = await call(key, 'totals?min_amount=5');
    expect(totals.status, totals.text).toBe(200);
    expect(totals.body.rows.map((r: { country: string }) => r.country).sort()).toEqual(['DE', 'FR', 'IT']);
    expect((await call(key, 'by-country?country=FR')).body).toEqual({ key: { country: 'FR' }, rows: [{ id: 1, amount: 10.5, day: '2024-01-02' }] });
    const batch = await call(key, 'by-country', { keys: [{ country: 'DE' }, { country: 'XX' }, { country: 'FR' }] });
    expect(batch.body.results.map((r: { rows: unknown[] }) => r.rows.length)).toEqual([1, 0, 1]);
    const predicted = await call(key, 'amount', { rows: [{ country: 'FR', paid: true }, { country: 'ES', paid: false }] });
    expect(predicted.status, predicted.text).toBe(200);
    expect(predicted.body.predictions).toHaveLength(2);
    expect(predicted.body.version).toBe(1);
    const document = await t.request('GET', '/api/service/orders/openapi.json', { token: null, headers: { 'x-api-key': key } });
    expect(Object.keys(document.body.paths).sort()).toEqual(['/amount', '/by-country', '/totals']);
    expect((await t.request('GET', `/api/publishing/api-services/${svc}/keys`)).body.items).toHaveLength(1);
    expect((await t.request('DELETE', `/api/publishing/api-services/${svc}/keys/1`)).status).toBe(204);
    expect((await call(key, 'by-country?country=FR')).status).toBe(401);
  });
});
