import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel, type TestResponse } from '../harness/index.ts';
import { byRegionSql, customersFixture } from './customers-fixture.ts';
import { importedModel, importOnnx, IRIS_ONNX, IRIS_ROWS } from './onnx-helpers.ts';

const BASE = '/api/publishing/api-services';

const CUSTOMERS = [
  { id: 1, region: 'EU', name: 'Ada', email: 'ada@example.test' },
  { id: 2, region: 'US', name: 'Bob', email: 'bob@example.test' },
  { id: 3, region: 'EU', name: 'Cyd', email: 'cyd@example.test' },
  { id: 4, region: 'APAC', name: "O'Hara", email: 'oh@example.test' },
];

describe.each(DIALECTS)('API Service dry runs (%s)', (dialect) => {
  let t: TestKernel;
  let projectId: number;
  let customersId: number;
  /** A draft service: sql, lookups, a pinned ONNX model and a function. */
  let draft: { id: number; key: string };
  /** An editor under a row policy limiting customers to EU, without datasets.pii.read. */
  let analyst: { id: number; token: string };

  const dryRun = (endpoint: string, body: unknown, options: { token?: string; id?: number } = {}) =>
    t.request('POST', `${BASE}/${options.id ?? draft.id}/endpoints/${endpoint}/test`, { body, token: options.token });
  /** A 4xx whose errors name exactly this field. */
  const expectField = (res: TestResponse, status: number, path: string) => {
    expect(res.status, res.text).toBe(status);
    expect(res.body.errors?.map((e: { path: string }) => e.path), res.text).toContain(path);
  };
  const ids = (res: TestResponse) => res.body.result.rows.map((r: { id: number }) => r.id);

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    ({ projectId, customersId } = await customersFixture(t, 'DRY', CUSTOMERS));

    analyst = await t.userToken('editor', 'dry-run-analyst');
    const group = await t.request('POST', '/api/groups', { body: { name: 'eu-only', capabilities: [] } });
    expect((await t.request('POST', `/api/groups/${group.body.id}/members`, { body: { user_id: analyst.id } })).status).toBe(201);
    const policy = await t.request('POST', `/api/datasets/${customersId}/row-policies`, { body: { group_id: group.body.id, filters: ['region:eq:EU'] } });
    expect(policy.status, policy.text).toBe(201);

    const iris = await importedModel(t, projectId, 'iris');
    expect((await importOnnx(t, iris, IRIS_ONNX)).status).toBe(201);
    const created = await t.request('POST', BASE, {
      body: {
        project_id: projectId,
        name: 'Dry',
        key: 'dry',
        endpoints: [
          byRegionSql('id, name, email', { unmasked_columns: ['email'] }),
          { name: 'all', kind: 'sql', config: { query: 'select id from customers order by id' } },
          { name: 'customer', kind: 'lookup', config: { dataset_id: customersId, keys: ['region'], columns: ['id', 'name', 'email'], unmasked_columns: ['email'] } },
          { name: 'one-customer', kind: 'lookup', config: { dataset_id: customersId, keys: ['region'], columns: ['id'], on_multiple: 'error' } },
          { name: 'species', kind: 'model', config: { model_id: iris, version: 1 } },
          { name: 'later', kind: 'function', config: {} },
        ],
      },
    });
    expect(created.status, created.text).toBe(201);
    draft = created.body;
  });
  afterAll(async () => t?.stop());

  it('runs each kind of endpoint of a draft service, answering the result, its timing, the endpoint and its kind', async () => {
    expect((await t.request('GET', `${BASE}/${draft.id}`)).body.status).toBe('draft');
    const sql = await dryRun('by-region', { query: { region: 'EU' } });
    expect(sql.status, sql.text).toBe(200);
    expect(sql.body).toMatchObject({ endpoint: 'by-region', kind: 'sql', timing_ms: expect.any(Number) });
    expect(sql.body.result).toMatchObject({ rows: [{ id: 1, name: 'Ada', email: 'ada@example.test' }, { id: 3, name: 'Cyd', email: 'cyd@example.test' }], row_count: 2, truncated: false });
    // Text as a query string carries it, typed values as a JSON body does.
    expect(ids(await dryRun('by-region', { query: { region: 'EU', min_id: '2' } }))).toEqual([3]);
    expect(ids(await dryRun('by-region', { body: { region: 'EU', min_id: 2 } }))).toEqual([3]);

    const one = await dryRun('customer', { query: { region: 'US' } });
    expect(one.status, one.text).toBe(200);
    expect(one.body).toMatchObject({ kind: 'lookup', result: { key: { region: 'US' }, rows: [{ id: 2, name: 'Bob', email: 'bob@example.test' }] } });
    const batch = await dryRun('customer', { body: { keys: [{ region: 'APAC' }, { region: 'Mars' }] } });
    expect(batch.body.result.results.map((r: { rows: { id: number }[] }) => r.rows.map((row) => row.id))).toEqual([[4], []]);

    const species = await dryRun('species', { body: { rows: IRIS_ROWS } });
    expect(species.status, species.text).toBe(200);
    expect(species.body).toMatchObject({ kind: 'model', result: { predictions: ['setosa', 'versicolor', 'virginica'], version: 1 } });

    const later = await dryRun('later', { body: {} });
    expect(later.status, later.text).toBe(501);
  });

  it('answers endpoint errors as a call does: 400 naming the input, 409', async () => {
    expectField(await dryRun('by-region', { query: { region: 'EU', min_id: 'abc' } }), 400, 'query.min_id');
    expectField(await dryRun('by-region', { body: { region: 'EU', min_id: '2' } }), 400, 'body.min_id');
    expectField(await dryRun('by-region', { body: { region: 42 } }), 400, 'body.region');
    expectField(await dryRun('by-region', { query: {} }), 400, 'query.region');
    expectField(await dryRun('by-region', { query: { region: ['EU', 'US'] } }), 400, 'query.region');
    expectField(await dryRun('by-region', { query: { region: 'EU', sql: 'drop' } }), 400, 'query.sql');
    expectField(await dryRun('customer', { body: { keys: [{ region: 'EU' }, { nation: 'EU' }] } }), 400, 'body.keys.1.nation');
    expectField(await dryRun('customer', { body: { keys: [] } }), 400, 'body.keys');
    expectField(await dryRun('species', { body: { rows: [IRIS_ROWS[0], { ...IRIS_ROWS[1], petal_width: 'wide' }] } }), 400, 'body.rows.1.petal_width');
    expectField(await dryRun('species', { query: {} }), 400, 'body.rows');
    const several = await dryRun('one-customer', { query: { region: 'EU' } });
    expect(several.status, several.text).toBe(409);
    expect(several.body.detail).toMatch(/more than one row/);
  });

  it('refuses a request body with both or neither of query and body (400 naming body), and an unknown endpoint (404 naming it)', async () => {
    expectField(await dryRun('by-region', { query: { region: 'EU' }, body: { region: 'EU' } }), 400, 'body');
    expectField(await dryRun('by-region', {}), 400, 'body');
    expectField(await dryRun('by-region', { query: { region: 'EU' }, extra: 1 }), 400, 'body.extra');
    expectField(await dryRun('by-region', { query: { region: 1 } }), 400, 'body.query.region');
    expectField(await dryRun('by-region', { body: ['EU'] }), 400, 'body.body');
    const unknown = await dryRun('nowhere', { query: {} });
    expect(unknown.status, unknown.text).toBe(404);
    expect(unknown.body.detail).toContain('"nowhere"');
    expect((await dryRun('by-region', { query: { region: 'EU' } }, { id: 999_999 })).status).toBe(404);
  });

  it('reads with the caller\u2019s rights: their row policy limits the rows, PII stays masked without datasets.pii.read', async () => {
    const sql = await dryRun('all', { query: {} }, { token: analyst.token });
    expect(sql.status, sql.text).toBe(200);
    expect(ids(sql)).toEqual([1, 3]);
    expect(ids(await dryRun('all', { query: {} }))).toEqual([1, 2, 3, 4]);
    // The endpoint lists email in unmasked_columns; the analyst may not see PII.
    expect((await dryRun('by-region', { query: { region: 'EU' } }, { token: analyst.token })).body.result.rows).toEqual([
      { id: 1, name: 'Ada', email: '***' },
      { id: 3, name: 'Cyd', email: '***' },
    ]);
    const lookup = await dryRun('customer', { body: { keys: [{ region: 'US' }, { region: 'EU' }] } }, { token: analyst.token });
    expect(lookup.status, lookup.text).toBe(200);
    expect(lookup.body.result.results.map((r: { rows: unknown[] }) => r.rows)).toEqual([[], [{ id: 1, name: 'Ada', email: '***' }, { id: 3, name: 'Cyd', email: '***' }]]);
  });

  it('binds hostile inputs, never splicing them: quotes and comments of both dialects; NUL and huge values refused naming the input', async () => {
    const hostile = ["EU' or '1'='1", "EU'; drop table customers; --", "EU' --", 'EU /* */', "EU'/*", "' union select 1, name, email from customers --", '$$; select 1; $$', "E'\\'' or 1=1 --", '`region`', '"region"', "EU\\' or 1=1 #", '$1'];
    for (const region of hostile) {
      const viaQuery = await dryRun('by-region', { query: { region } });
      expect(viaQuery.status, `${region}: ${viaQuery.text}`).toBe(200);
      expect(viaQuery.body.result.rows, region).toEqual([]);
      const viaLookup = await dryRun('customer', { body: { region } });
      expect(viaLookup.status, `${region}: ${viaLookup.text}`).toBe(200);
      expect(viaLookup.body.result.rows, region).toEqual([]);
    }
    expect((await dryRun('customer', { query: { region: 'APAC' } })).body.result.rows).toEqual([{ id: 4, name: "O'Hara", email: 'oh@example.test' }]);
    // The kernel refuses a NUL anywhere in a JSON body, naming it where the dry run's request holds it.
    expectField(await dryRun('by-region', { query: { region: 'EU\u0000' } }), 400, 'body.query.region');
    expectField(await dryRun('customer', { body: { region: 'EU\u0000' } }), 400, 'body.body.region');
    const huge = await dryRun('by-region', { body: { region: 'x'.repeat(50_000) } });
    expectField(huge, 400, 'body.region');
    expect(huge.text.length).toBeLessThan(2000);
    expectField(await dryRun('by-region', { query: { region: 'EU', min_id: '9'.repeat(400) } }), 400, 'query.min_id');
    // An input name as long as a huge value is refused by the request's schema, before the endpoint echoes it.
    expect((await dryRun('by-region', { query: { ['x'.repeat(5000)]: 'EU' } })).status).toBe(400);
    // Sent as JSON text: an object literal's __proto__ would set its prototype, not a key.
    expect((await dryRun('by-region', JSON.parse('{"body": {"__proto__": {"region": "EU"}}}'))).status).toBe(400);
    for (const name of ['constructor', 'toString']) expectField(await dryRun('by-region', { body: { region: 'EU', [name]: 1 } }), 400, `body.${name}`);
    expect((await t.request('GET', `/api/datasets/${customersId}/rows?limit=10`)).body.rows).toHaveLength(CUSTOMERS.length);
  });

  it('runs a published and an unpublished service too', async () => {
    expect((await t.request('POST', `${BASE}/${draft.id}/publish`)).status).toBe(200);
    expect(ids(await dryRun('all', { query: {} }))).toEqual([1, 2, 3, 4]);
    expect((await t.request('POST', `${BASE}/${draft.id}/unpublish`)).status).toBe(200);
    expect(ids(await dryRun('all', { query: {} }))).toEqual([1, 2, 3, 4]);
  });

  it('audits one publishing.endpoint.test row per dry run, failures included', async () => {
    const events = async () => (await t.request('GET', `/api/audit?action=publishing.endpoint.test&target=api_service:${draft.id}&limit=500`)).body.items;
    const before = (await events()).length;
    expect((await dryRun('all', { query: {} })).status).toBe(200);
    expect((await dryRun('later', { query: {} })).status).toBe(501);
    const after = await events();
    expect(after.length).toBe(before + 2);
    expect(after.slice(0, 2).map((e: { outcome: string; details: { endpoint: string } }) => [e.details.endpoint, e.outcome])).toEqual([
      ['later', 'failure'],
      ['all', 'success'],
    ]);
  });

  it('refuses a viewer (publishing.write), a token without datasets.read (403), and another organization (404)', async () => {
    const viewer = await t.userToken('viewer', 'dry-run-viewer');
    expect((await dryRun('all', { query: {} }, { token: viewer.token })).status).toBe(403);
    const pat = await t.request('POST', '/api/auth/tokens', { body: { name: 'no datasets.read', scopes: ['publishing.read', 'publishing.write'] } });
    expect(pat.status, pat.text).toBe(201);
    const unread = await dryRun('all', { query: {} }, { token: pat.body.token });
    expect(unread.status, unread.text).toBe(403);
    expect(unread.body.detail).toMatch(/datasets\.read/);
    const outsider = await t.outsider('dry-run-outsider');
    const theirs = await dryRun('all', { query: {} }, { token: outsider.token });
    expect(theirs.status, theirs.text).toBe(404);
    expect(theirs.text).not.toContain('Ada');
  });
});
