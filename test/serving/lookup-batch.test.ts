import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

const BASE = '/api/publishing/api-services';

/**
 * Batches of lookup keys: answered by one read where it can, key by key otherwise; either way each
 * key's rows are exactly those a call with that key alone answers, in input order.
 */
describe.each(DIALECTS)('lookup batches (%s)', (dialect) => {
  let t: TestKernel;
  let datasetId: number;
  let secret: string;

  const post = (endpoint: string, body: unknown) => t.request('POST', `/api/service/batches/${endpoint}`, { token: null, body, headers: { 'x-api-key': secret } });
  const single = async (endpoint: string, key: Record<string, unknown>) => {
    const res = await post(endpoint, key);
    expect(res.status, res.text).toBe(200);
    return res.body.rows;
  };
  /** The batch's answer, checked against the same keys asked one by one. */
  const batchMatchesSingles = async (endpoint: string, keys: Record<string, unknown>[]) => {
    const res = await post(endpoint, { keys });
    expect(res.status, res.text).toBe(200);
    const singles = [];
    for (const key of keys) singles.push({ key, rows: await single(endpoint, key) });
    expect(res.body.results).toEqual(singles);
    return res.body.results as { key: Record<string, unknown>; rows: Record<string, unknown>[] }[];
  };

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    const projectId = (await t.request('POST', '/api/projects', { body: { key: 'BATCH', name: 'Batches' } })).body.id;
    const columns = [
      { name: 'id', type: 'integer' },
      { name: 'city', type: 'string' },
      { name: 'day', type: 'date' },
      { name: 'email', type: 'string', pii: true },
    ];
    datasetId = (await t.request('POST', '/api/datasets', { body: { name: 'people', project_id: projectId, columns } })).body.id;
    const rows = [
      { id: 1, city: 'Paris', day: '2024-01-01', email: 'a@example.test' },
      { id: 2, city: 'Paris', day: '2024-01-02', email: 'b@example.test' },
      { id: 3, city: 'Lyon', day: '2024-01-01', email: 'c@example.test' },
      { id: 4, city: 'Saint-Denis, Réunion', day: '2024-01-03', email: null },
      { id: 5, city: "L'Haÿ -- /*x*/", day: '2024-01-04', email: 'e@example.test' },
      ...Array.from({ length: 1200 }, (_, i) => ({ id: 100 + i, city: 'Crowded', day: '2024-02-01', email: null })),
    ];
    expect((await t.request('POST', `/api/datasets/${datasetId}/rows`, { body: rows })).status).toBe(200);
    const lookup = (name: string, config: Record<string, unknown>) => ({ name, kind: 'lookup', config: { dataset_id: datasetId, ...config } });
    const created = await t.request('POST', BASE, {
      body: {
        project_id: projectId,
        name: 'Batches',
        key: 'batches',
        endpoints: [
          lookup('by-id', { keys: ['id'] }),
          lookup('by-city', { keys: ['city'], columns: ['id', 'email'], max_rows_per_key: 5 }),
          lookup('first-by-city', { keys: ['city'], on_multiple: 'first' }),
          lookup('one-by-city', { keys: ['city'], on_multiple: 'error' }),
          lookup('by-day', { keys: ['day'] }),
        ],
      },
    });
    expect(created.status, created.text).toBe(201);
    expect((await t.request('POST', `${BASE}/${created.body.id}/publish`)).status).toBe(200);
    secret = (await t.request('POST', `${BASE}/${created.body.id}/keys`, { body: { name: 'batches' } })).body.key;
  });
  afterAll(() => t?.stop());

  it('answers keys of an integer column in input order, repeated and missing keys included', async () => {
    const results = await batchMatchesSingles('by-id', [{ id: 3 }, { id: 1 }, { id: 99 }, { id: 3 }, { id: 2 }]);
    expect(results.map((r) => r.rows.map((row) => row.id))).toEqual([[3], [1], [], [3], [2]]);
    // PII the endpoint does not list reads masked in a batch as alone.
    expect(results[0].rows[0].email).toBe('***');
    // A full batch whose rows per key (100 each at most) could not all fit a page, but whose matching rows do.
    const full = await batchMatchesSingles('by-id', Array.from({ length: 100 }, (_, i) => ({ id: 100 + i * 7 })));
    expect(full.every((r) => r.rows.length === 1)).toBe(true);
  });

  it('keeps each key to its own rows, in row order, within max_rows_per_key, without the key column when not answered', async () => {
    const results = await batchMatchesSingles('by-city', [{ city: 'Paris' }, { city: 'Lyon' }, { city: 'Nowhere' }]);
    expect(results.map((r) => r.rows)).toEqual([
      [
        { id: 1, email: '***' },
        { id: 2, email: '***' },
      ],
      [{ id: 3, email: '***' }],
      [],
    ]);
  });

  it('answers alike where one read cannot: a key matching more rows than a page, a comma or quotes in a key, a date key, a null key', async () => {
    const crowded = await batchMatchesSingles('by-city', [{ city: 'Crowded' }, { city: 'Paris' }]);
    expect(crowded[0].rows.map((row) => row.id)).toEqual([100, 101, 102, 103, 104]);
    await batchMatchesSingles('by-city', [{ city: 'Saint-Denis, Réunion' }, { city: "L'Haÿ -- /*x*/" }, { city: 'Lyon' }]);
    await batchMatchesSingles('by-day', [{ day: '2024-01-01' }, { day: '2024-01-04' }]);
    await batchMatchesSingles('by-city', [{ city: null }, { city: 'Lyon' }]);
  });

  it('answers the first row per key with on_multiple first, and a 409 naming the key with on_multiple error', async () => {
    const first = await batchMatchesSingles('first-by-city', [{ city: 'Paris' }, { city: 'Lyon' }]);
    expect(first.map((r) => r.rows.map((row) => row.id))).toEqual([[1], [3]]);
    const several = await post('one-by-city', { keys: [{ city: 'Lyon' }, { city: 'Paris' }] });
    expect(several.status, several.text).toBe(409);
    expect(several.body.detail).toMatch(/^body\.keys\.1: more than one row/);
    expect((await post('one-by-city', { keys: [{ city: 'Lyon' }, { city: 'Nowhere' }] })).body.results.map((r: { rows: unknown[] }) => r.rows.length)).toEqual([1, 0]);
  });
});
