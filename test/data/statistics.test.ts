import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

describe.each(DIALECTS)('statistics (%s)', (dialect) => {
  let t: TestKernel;
  let editor: string;
  let datasetId: number;
  const profile = () => t.request('GET', `/api/statistics/datasets/${datasetId}`);
  const column = (p: { columns: { name: string }[] }, name: string) => p.columns.find((c) => c.name === name) as Record<string, any>;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    editor = (await t.userToken('editor')).token;
    const project = await t.request('POST', '/api/projects', { body: { key: 'STATS', name: 'Stats' } });
    const dataset = await t.request('POST', '/api/datasets', {
      body: {
        name: 'measures',
        project_id: project.body.id,
        columns: [
          { name: 'n', type: 'integer' },
          { name: 'x', type: 'number' },
          { name: 'city', type: 'string' },
          { name: 'day', type: 'date' },
          { name: 'ok', type: 'boolean' },
          { name: 'email', type: 'string', pii: true },
        ],
      },
    });
    datasetId = dataset.body.id;
    // n = 1..10, x = n / 2 with two nulls, cities skewed, days spread over January.
    const rows = Array.from({ length: 10 }, (_, i) => {
      const n = i + 1;
      const x = n === 3 || n === 7 ? '' : String(n / 2);
      const city = n <= 5 ? 'Paris' : n <= 8 ? 'Lyon' : 'Nice';
      return `${n},${x},${city},2024-01-${String(n).padStart(2, '0')},${n % 2 === 0},u${n}@example.test`;
    });
    const load = await t.request('POST', `/api/datasets/${datasetId}/data`, { body: `n,x,city,day,ok,email\n${rows.join('\n')}\n`, headers: { 'content-type': 'text/csv' } });
    expect(load.status).toBe(200);
  });
  afterAll(async () => t?.stop());

  it('profiles every column in the database', async () => {
    const res = await profile();
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ dataset_id: datasetId, row_count: 10, cached: false });
    const n = column(res.body, 'n');
    expect(n).toMatchObject({ type: 'integer', count: 10, nulls: 0, distinct: 10, min: 1, max: 10, mean: 5.5, quantiles: { p25: 3, p50: 5, p75: 8 }, masked: false });
    expect(n.stddev).toBeCloseTo(3.02765, 4); // sample standard deviation of 1..10
    expect(n.histogram).toHaveLength(10);
    expect(n.histogram.reduce((sum: number, b: { count: number }) => sum + b.count, 0)).toBe(10);
    expect(n.histogram[0]).toEqual({ from: 1, to: 1.9, count: 1 });
    expect(n.histogram[9]).toMatchObject({ to: 10, count: 1 });

    const x = column(res.body, 'x');
    expect(x).toMatchObject({ count: 8, nulls: 2, distinct: 8, min: 0.5, max: 5 });
    expect(x.mean).toBeCloseTo((0.5 + 1 + 2 + 2.5 + 3 + 4 + 4.5 + 5) / 8, 10);

    const city = column(res.body, 'city');
    expect(city).toMatchObject({ distinct: 3, min: 'Lyon', max: 'Paris', mean: null, histogram: null });
    expect(city.top_values).toEqual([
      { value: 'Paris', count: 5 },
      { value: 'Lyon', count: 3 },
      { value: 'Nice', count: 2 },
    ]);
    expect(column(res.body, 'day')).toMatchObject({ min: '2024-01-01', max: '2024-01-10', quantiles: { p50: '2024-01-05' } });
    expect(column(res.body, 'ok').top_values).toEqual([
      { value: false, count: 5 },
      { value: true, count: 5 },
    ]);
  });

  it('rounds histogram edges to the precision of the data, and counts a value on an edge in the bucket it starts', async () => {
    const project = await t.request('POST', '/api/projects', { body: { key: 'TENTHS', name: 'Tenths' } });
    const dataset = await t.request('POST', '/api/datasets', { body: { name: 'tenths', project_id: project.body.id, columns: [{ name: 'v', type: 'number' }] } });
    const values = Array.from({ length: 11 }, (_, i) => (i / 10).toFixed(1)); // 0.0, 0.1, … 1.0
    const load = await t.request('POST', `/api/datasets/${dataset.body.id}/data`, { body: `v\n${values.join('\n')}\n`, headers: { 'content-type': 'text/csv' } });
    expect(load.status).toBe(200);
    const res = await t.request('GET', `/api/statistics/datasets/${dataset.body.id}/columns/v`);
    expect(res.status).toBe(200);
    // 0.1 · 3 would be 0.30000000000000004, and 0.3 / 0.1 would floor to bucket 2.
    const edges = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1];
    expect(res.body.histogram).toEqual(edges.slice(1).map((to, i) => ({ from: edges[i], to, count: i === 9 ? 2 : 1 })));
  });

  it('serves the profile of a dataset version from the cache, and recomputes when the data changes', async () => {
    expect((await profile()).body.cached).toBe(true);
    const appended = await t.request('POST', `/api/datasets/${datasetId}/rows`, { body: [{ n: 100, city: 'Nice' }] });
    expect(appended.status).toBe(200);
    const fresh = await profile();
    expect(fresh.body).toMatchObject({ cached: false, row_count: 11, version: appended.body.dataset.version });
    expect(column(fresh.body, 'n').max).toBe(100);
    // Ties are ordered by value: Lyon and Nice both have 3 now.
    expect(column(fresh.body, 'city').top_values).toEqual([
      { value: 'Paris', count: 5 },
      { value: 'Lyon', count: 3 },
      { value: 'Nice', count: 3 },
    ]);
  });

  it('answers one column, and 404 for an unknown one', async () => {
    const res = await t.request('GET', `/api/statistics/datasets/${datasetId}/columns/city`);
    expect(res.status).toBe(200);
    expect(res.body.name).toBe('city');
    expect((await t.request('GET', `/api/statistics/datasets/${datasetId}/columns/nope`)).status).toBe(404);
  });

  it('shows only counts of a PII column to callers without datasets.pii.read', async () => {
    const mine = column((await profile()).body, 'email');
    expect(mine).toMatchObject({ masked: false, min: expect.stringMatching(/@example\.test$/) });
    expect(mine.top_values.length).toBeGreaterThan(0);
    const res = await t.request('GET', `/api/statistics/datasets/${datasetId}`, { token: editor });
    const email = column(res.body, 'email');
    expect(email).toMatchObject({ masked: true, count: 10, nulls: 1, distinct: 10, min: null, max: null, top_values: [], quantiles: null });
    expect(JSON.stringify(res.body)).not.toContain('@example.test');
  });

  it('computes a stable standard deviation for large values close together', async () => {
    const project = await t.request('POST', '/api/projects', { body: { key: 'BIGSTATS', name: 'Big stats' } });
    const dataset = await t.request('POST', '/api/datasets', { body: { name: 'big', project_id: project.body.id, columns: [{ name: 'v', type: 'integer' }] } });
    const load = await t.request('POST', `/api/datasets/${dataset.body.id}/data`, { body: 'v\n1000000001\n1000000002\n1000000003\n1000000004\n', headers: { 'content-type': 'text/csv' } });
    expect(load.status).toBe(200);
    const v = column((await t.request('GET', `/api/statistics/datasets/${dataset.body.id}`)).body, 'v');
    expect(v.mean).toBeCloseTo(1000000002.5, 6);
    // Σx² − n·mean² cancels catastrophically here (Σx² ≈ 4e18); the sample stddev is √(5/3).
    expect(v.stddev).toBeCloseTo(1.2909944, 6);
  });

  it('keeps profiles inside their organization', async () => {
    const { token } = await t.outsider('stats-outsider');
    expect((await t.request('GET', `/api/statistics/datasets/${datasetId}`, { token })).status).toBe(404);
    expect((await t.request('GET', `/api/statistics/datasets/${datasetId}/columns/n`, { token })).status).toBe(404);
    expect((await t.request('GET', `/api/statistics/datasets/${datasetId}`, { token, headers: { 'x-org-id': '1' } })).status).toBe(403);
    expect((await t.request('GET', `/api/statistics/datasets/${datasetId}`, { token: null })).status).toBe(401);
  });
});
