import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel, type TestResponse } from '../harness/index.ts';
import { finished } from '../pipeline/pipeline-helpers.ts';
import { importedModel, importOnnx, IRIS_ONNX, IRIS_ROWS } from './onnx-helpers.ts';

const BASE = '/api/publishing/api-services';

/** Customers: two in EU (one of them twice named), one in US; email is PII. */
const CUSTOMERS = [
  { id: 1, region: 'EU', name: 'Ada', email: 'ada@example.test', tier: 'gold' },
  { id: 2, region: 'US', name: 'Bob', email: 'bob@example.test', tier: 'silver' },
  { id: 3, region: 'EU', name: 'Cyd', email: 'cyd@example.test', tier: 'gold' },
  { id: 4, region: 'APAC', name: "O'Hara", email: 'oh@example.test', tier: 'bronze' },
];

describe.each(DIALECTS)('API Services and data API keys (%s)', (dialect) => {
  let t: TestKernel;
  let projectId: number;
  let customersId: number;
  /** A model of the registry (imported, no version yet), for model endpoints. */
  let modelId: number;
  /** The service most tests call, published by the platform admin. */
  let shop: { id: number; key: string };

  const SQL_ENDPOINT = {
    name: 'by-region',
    kind: 'sql',
    config: {
      query: 'select id, name, email from customers where region = $1 and id >= $2 order by id',
      params: [
        { name: 'region', type: 'string', required: true },
        { name: 'min_id', type: 'integer', default: 0 },
      ],
      max_rows: 100,
    },
  };
  const lookup = (name: string, config: Record<string, unknown>) => ({ name, kind: 'lookup', config: { dataset_id: customersId, ...config } });

  const create = (body: Record<string, unknown>, token?: string) => t.request('POST', BASE, { body, token });
  const call = (key: string | null, service: string, endpoint: string, options: { query?: string; body?: unknown; token?: string } = {}) =>
    t.request(options.body === undefined ? 'GET' : 'POST', `/api/service/${service}/${endpoint}${options.query ?? ''}`, {
      token: options.token ?? null,
      body: options.body,
      headers: key === null ? {} : { 'x-api-key': key },
    });
  /** A key minted by the service's publisher (the admin unless `token` says who). */
  const mint = async (serviceId: number, body: Record<string, unknown> = {}, token?: string) => {
    const res = await t.request('POST', `${BASE}/${serviceId}/keys`, { body: { name: 'consumer', ...body }, token });
    expect(res.status, res.text).toBe(201);
    return res.body as { id: number; key: string };
  };
  const publish = async (id: number, token?: string) => {
    const res = await t.request('POST', `${BASE}/${id}/publish`, { token });
    expect(res.status, res.text).toBe(200);
    return res.body;
  };
  /** A 400 whose errors name exactly this field. */
  const expectField = (res: TestResponse, status: number, path: string) => {
    expect(res.status, res.text).toBe(status);
    expect(res.body.errors?.map((e: { path: string }) => e.path), res.text).toContain(path);
  };

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    projectId = (await t.request('POST', '/api/projects', { body: { key: 'SHOP', name: 'Shop' } })).body.id;
    const columns = [
      { name: 'id', type: 'integer' },
      { name: 'region', type: 'string' },
      { name: 'name', type: 'string' },
      { name: 'email', type: 'string', pii: true },
      { name: 'tier', type: 'string' },
    ];
    const dataset = await t.request('POST', '/api/datasets', { body: { name: 'customers', project_id: projectId, columns } });
    expect(dataset.status, dataset.text).toBe(201);
    customersId = dataset.body.id;
    expect((await t.request('POST', `/api/datasets/${customersId}/rows`, { body: CUSTOMERS })).status).toBe(200);
    const model = await t.request('POST', '/api/registry/imported-models', { body: { project_id: projectId, name: 'scorer', task: 'regression' } });
    expect(model.status, model.text).toBe(201);
    modelId = model.body.id;
    const created = await create({
      project_id: projectId,
      name: 'Shop',
      key: 'shop',
      endpoints: [
        SQL_ENDPOINT,
        lookup('customer', { keys: ['region'], columns: ['id', 'name', 'region'], max_rows_per_key: 10 }),
        lookup('first-customer', { keys: ['region'], columns: ['id', 'name'], on_multiple: 'first' }),
        lookup('one-customer', { keys: ['region'], columns: ['id', 'name'], on_multiple: 'error' }),
        lookup('customer-by-id', { keys: ['id'], columns: ['id', 'email'], unmasked_columns: ['email'] }),
        { name: 'score', kind: 'model', config: { model_id: modelId } },
        { name: 'later', kind: 'function', config: {} },
      ],
    });
    expect(created.status, created.text).toBe(201);
    shop = created.body;
  });
  afterAll(async () => t?.stop());

  describe('managing services', () => {
    it('creates a draft api_service asset, lists, gets, changes and deletes it', async () => {
      const created = await create({ project_id: projectId, name: 'Temp', key: 'temp-1', endpoints: [SQL_ENDPOINT] });
      expect(created.status, created.text).toBe(201);
      expect(created.body).toMatchObject({ key: 'temp-1', asset_type: 'api_service', status: 'draft', published_by: null, endpoints: [{ name: 'by-region', kind: 'sql', config: { max_rows: 100, unmasked_columns: [] } }] });
      const listed = await t.request('GET', `${BASE}?project_id=${projectId}`);
      expect(listed.body.items.map((s: { key: string }) => s.key)).toEqual(expect.arrayContaining(['shop', 'temp-1']));
      expect((await t.request('GET', `${BASE}/${created.body.id}`)).body.name).toBe('Temp');
      const changed = await t.request('PATCH', `${BASE}/${created.body.id}`, { body: { name: 'Renamed', key: 'temp-2' } });
      expect(changed.status, changed.text).toBe(200);
      expect(changed.body).toMatchObject({ name: 'Renamed', key: 'temp-2' });
      expect((await t.request('DELETE', `${BASE}/${created.body.id}`)).status).toBe(204);
      expect((await t.request('GET', `${BASE}/${created.body.id}`)).status).toBe(404);
    });

    it('keeps a project holding API Services from being deleted (409), so none stays published without it', async () => {
      const project = await t.request('POST', '/api/projects', { body: { key: 'DOOMED', name: 'Doomed' } });
      const created = await create({ project_id: project.body.id, name: 'Doomed', key: 'doomed', endpoints: [{ name: 'f', kind: 'function', config: {} }] });
      await publish(created.body.id);
      const refused = await t.request('DELETE', `/api/projects/${project.body.id}`);
      expect(refused.status, refused.text).toBe(409);
      expect(refused.body.detail).toMatch(/1 API Service/);
      expect((await t.request('GET', `${BASE}/${created.body.id}`)).body.status).toBe('published');
      expect((await t.request('DELETE', `${BASE}/${created.body.id}`)).status).toBe(204);
      expect((await t.request('DELETE', `/api/projects/${project.body.id}`)).status).toBe(204);
    });

    it('keeps the key unique on the platform (409 naming it), even across organizations', async () => {
      const again = await create({ project_id: projectId, name: 'Copy', key: 'shop', endpoints: [SQL_ENDPOINT] });
      expect(again.status).toBe(409);
      expect(again.body.detail).toContain('"shop"');
      const outsider = await t.outsider('key-thief');
      const theirProject = await t.request('POST', '/api/projects', { token: outsider.token, body: { key: 'THEIRS', name: 'Theirs' } });
      const theirs = await create({ project_id: theirProject.body.id, name: 'Theirs', key: 'shop', endpoints: [{ name: 'f', kind: 'function', config: {} }] }, outsider.token);
      expect(theirs.status).toBe(409);
    });

    it('refuses bad services, naming the field', async () => {
      const body = (endpoints: unknown[], extra: Record<string, unknown> = {}) => ({ project_id: projectId, name: 'Bad', key: 'bad', endpoints, ...extra });
      expectField(await create(body([SQL_ENDPOINT], { key: 'Not A Slug' })), 400, 'body.key');
      expectField(await create(body([SQL_ENDPOINT], { key: '../etc' })), 400, 'body.key');
      expectField(await create(body([{ name: 'x', kind: 'graphql', config: {} }])), 400, 'body.endpoints.0.kind');
      expectField(await create(body([SQL_ENDPOINT, SQL_ENDPOINT])), 400, 'body.endpoints.1.name');
      expectField(await create(body([{ ...SQL_ENDPOINT, config: { ...SQL_ENDPOINT.config, query: 'delete from customers' } }])), 400, 'body.endpoints.0.config.query');
      expectField(await create(body([{ ...SQL_ENDPOINT, config: { ...SQL_ENDPOINT.config, query: 'select * from nowhere' } }])), 400, 'body.endpoints.0.config.query');
      expectField(await create(body([{ ...SQL_ENDPOINT, config: { ...SQL_ENDPOINT.config, max_rows: 1_000_000 } }])), 400, 'body.endpoints.0.config.max_rows');
      expectField(await create(body([{ ...SQL_ENDPOINT, config: { ...SQL_ENDPOINT.config, params: [{ name: 'n', type: 'integer', default: 'many' }] } }])), 400, 'body.endpoints.0.config.params.0.default');
      expectField(await create(body([{ ...SQL_ENDPOINT, config: { ...SQL_ENDPOINT.config, params: [{ name: 'n', type: 'blob' }] } }])), 400, 'body.endpoints.0.config.params.0.type');
      expectField(await create(body([lookup('l', { keys: ['nope'] })])), 400, 'body.endpoints.0.config.keys.0');
      expectField(await create(body([lookup('l', { keys: ['email'] })])), 400, 'body.endpoints.0.config.keys.0');
      expectField(await create(body([lookup('l', { keys: ['id'], columns: ['id', 'ghost'] })])), 400, 'body.endpoints.0.config.columns.1');
      expectField(await create(body([lookup('l', { keys: ['id'], filters: ['tier:like:x'] })])), 400, 'body.endpoints.0.config.filters.0');
      expectField(await create(body([lookup('l', { keys: ['id'], on_multiple: 'some' })])), 400, 'body.endpoints.0.config.on_multiple');
      expectField(await create(body([lookup('l', { keys: ['id'], dataset_id: 999_999 })])), 422, 'body.endpoints.0.config.dataset_id');
      expectField(await create(body([{ name: 'm', kind: 'model', config: { model_id: 'x' } }])), 400, 'body.endpoints.0.config.model_id');
      expectField(await create(body([SQL_ENDPOINT, { name: 'm', kind: 'model', config: { model_id: 999_999 } }])), 422, 'body.endpoints.1.config.model_id');
      expectField(await create(body([SQL_ENDPOINT], { project_id: 999_999 })), 422, 'body.project_id');
      expectField(await t.request('PATCH', `${BASE}/${shop.id}`, { body: { endpoints: [lookup('l', { keys: ['nope'] })] } }), 400, 'body.endpoints.0.config.keys.0');
    });
  });

  describe('publishing', () => {
    it('mints no key for a draft (403), then serves once published, and 404 once unpublished', async () => {
      const early = await t.request('POST', `${BASE}/${shop.id}/keys`, { body: { name: 'early' } });
      expect(early.status, early.text).toBe(403);
      expect(early.body.detail).toMatch(/never published/);
      const published = await publish(shop.id);
      expect(published).toMatchObject({ status: 'published', published_by: expect.any(Number), published_at: expect.any(String) });
      const { key } = await mint(shop.id);
      expect((await call(key, 'shop', 'by-region', { query: '?region=EU' })).status).toBe(200);
      const unpublished = await t.request('POST', `${BASE}/${shop.id}/unpublish`);
      expect(unpublished.body.status).toBe('unpublished');
      expect((await call(key, 'shop', 'by-region', { query: '?region=EU' })).status).toBe(404);
      await publish(shop.id);
      expect((await call(key, 'shop', 'nope')).status).toBe(404);
      expect((await call(key, 'no-such-service', 'by-region')).status).toBe(404);
    });

    it('creates a database index on the key columns of each lookup', async () => {
      const indexed = dialect === 'postgres'
        ? await sql<{ def: string }>`select indexdef as def from pg_indexes where indexdef like ${'%(region)%'}`.execute(t.kernel.storage.db)
        : await sql<{ def: string }>`select sql as def from sqlite_master where type = 'index' and sql like ${'%("region")%'}`.execute(t.kernel.storage.db);
      expect(indexed.rows.length, JSON.stringify(indexed.rows)).toBeGreaterThanOrEqual(1);
    });
  });

  describe('endpoints', () => {
    let key: string;
    beforeAll(async () => {
      if ((await t.request('GET', `${BASE}/${shop.id}`)).body.status !== 'published') await publish(shop.id);
      key = (await mint(shop.id)).key;
    });

    it('runs a sql endpoint with typed parameters from the query string or a JSON body, PII masked', async () => {
      const get = await call(key, 'shop', 'by-region', { query: '?region=EU' });
      expect(get.status, get.text).toBe(200);
      expect(get.body.rows).toEqual([
        { id: 1, name: 'Ada', email: '***' },
        { id: 3, name: 'Cyd', email: '***' },
      ]);
      expect(get.body).toMatchObject({ row_count: 2, truncated: false });
      const post = await call(key, 'shop', 'by-region', { body: { region: 'EU', min_id: 2 } });
      expect(post.status, post.text).toBe(200);
      expect(post.body.rows.map((r: { id: number }) => r.id)).toEqual([3]);
      expect((await call(key, 'shop', 'by-region', { query: '?region=EU&min_id=3' })).body.rows.map((r: { id: number }) => r.id)).toEqual([3]);
    });

    it('refuses bad sql inputs with a 400 naming the field', async () => {
      expectField(await call(key, 'shop', 'by-region', { query: '?region=EU&min_id=abc' }), 400, 'query.min_id');
      expectField(await call(key, 'shop', 'by-region', { query: '?region=EU&min_id=1.5' }), 400, 'query.min_id');
      expectField(await call(key, 'shop', 'by-region', { body: { region: 'EU', min_id: '2' } }), 400, 'body.min_id');
      expectField(await call(key, 'shop', 'by-region', { body: { region: 42 } }), 400, 'body.region');
      expectField(await call(key, 'shop', 'by-region', { body: { region: ['EU'] } }), 400, 'body.region');
      expectField(await call(key, 'shop', 'by-region', { query: '' }), 400, 'query.region');
      expectField(await call(key, 'shop', 'by-region', { query: '?region=EU&region=US' }), 400, 'query.region');
      expectField(await call(key, 'shop', 'by-region', { query: '?region=EU&sql=drop' }), 400, 'query.sql');
    });

    it('reads a number from the query string in linear time, refusing a huge one (400)', async () => {
      const endpoint = { name: 'from', kind: 'sql', config: { query: 'select id from customers where id * 1.0 >= $1 order by id', params: [{ name: 'min', type: 'number', required: true }] } };
      const created = await create({ project_id: projectId, name: 'Numbers', key: 'numbers', endpoints: [endpoint] });
      await publish(created.body.id);
      const { key } = await mint(created.body.id);
      const from = await call(key, 'numbers', 'from', { query: '?min=2.5e0' });
      expect(from.status, from.text).toBe(200);
      expect(from.body.rows.map((r: { id: number }) => r.id)).toEqual([3, 4]);
      // 10,000 digits and an x took the old pattern quadratic time; refused either way.
      expectField(await call(key, 'numbers', 'from', { query: `?min=${'1'.repeat(9_999)}x` }), 400, 'query.min');
      // A number text is read only up to 400 characters, before any pattern: even a well-formed longer one is refused.
      expectField(await call(key, 'numbers', 'from', { query: `?min=${'0'.repeat(9_000)}3` }), 400, 'query.min');
      expectField(await call(key, 'numbers', 'from', { query: '?min=1.2.3' }), 400, 'query.min');
    });

    it('reads inputs named as Object\u2019s own (toString, valueOf) as any other, and refuses __proto__, constructor and prototype as names at save', async () => {
      const columns = [{ name: 'id', type: 'integer' }, { name: 'toString', type: 'string' }];
      const protos = await t.request('POST', '/api/datasets', { body: { name: 'protos', project_id: projectId, columns } });
      expect(protos.status, protos.text).toBe(201);
      await t.request('POST', `/api/datasets/${protos.body.id}/rows`, { body: [{ id: 1, toString: 'a' }, { id: 2, toString: 'b' }] });
      const endpoints = [
        { name: 'by-text', kind: 'lookup', config: { dataset_id: protos.body.id, keys: ['toString'], columns: ['id'] } },
        { name: 'from', kind: 'sql', config: { query: 'select id from protos where id >= $1 order by id', params: [{ name: 'valueOf', type: 'integer', default: 0 }] } },
      ];
      const created = await create({ project_id: projectId, name: 'Protos', key: 'protos', endpoints });
      expect(created.status, created.text).toBe(201);
      await publish(created.body.id);
      const { key } = await mint(created.body.id);
      const byText = await call(key, 'protos', 'by-text', { query: '?toString=b' });
      expect(byText.status, byText.text).toBe(200);
      expect(byText.body.rows).toEqual([{ id: 2 }]);
      expect((await call(key, 'protos', 'by-text', { body: { keys: [{ toString: 'a' }] } })).body.results[0].rows).toEqual([{ id: 1 }]);
      const from = await call(key, 'protos', 'from', { query: '?valueOf=2' });
      expect(from.status, from.text).toBe(200);
      expect(from.body.rows).toEqual([{ id: 2 }]);
      expect((await call(key, 'protos', 'from')).body.rows).toEqual([{ id: 1 }, { id: 2 }]);

      const named = (name: string) => [{ ...endpoints[1], config: { ...endpoints[1].config, params: [{ name, type: 'integer' }] } }];
      for (const name of ['__proto__', 'constructor', 'prototype']) {
        expectField(await create({ project_id: projectId, name: 'Bad', key: 'bad-name', endpoints: named(name) }), 400, 'body.endpoints.0.config.params.0.name');
        expectField(await create({ project_id: projectId, name: 'Bad', key: 'bad-name', endpoints: [{ ...endpoints[0], config: { ...endpoints[0].config, keys: [name] } }] }), 400, 'body.endpoints.0.config.keys.0');
        // Sent as JSON text: an object literal's __proto__ would set its prototype, not a key.
        const fixed = await t.request('POST', `${BASE}/${created.body.id}/keys`, { body: JSON.parse(`{"name": "k", "fixed_params": {"${name}": 1}}`) });
        // The HTTP layer's JSON parser refuses a __proto__ key before the route sees it.
        if (name === '__proto__') expect(fixed.status, fixed.text).toBe(400);
        else expectField(fixed, 400, `body.fixed_params.${name}`);
      }
    });

    it('binds hostile inputs, never splicing them: quotes and comments of both dialects, NUL bytes, huge values', async () => {
      const hostile = [
        "EU' or '1'='1",
        "EU'; drop table customers; --",
        "EU' --",
        'EU /* */',
        "EU'/*",
        "' union select 1, name, email from customers --",
        '$$; select 1; $$',
        "E'\\'' or 1=1 --",
        '`region`',
        '[region]',
        '"region"',
        "EU\\' or 1=1 #",
        '%',
        '?',
        '$1',
      ];
      for (const region of hostile) {
        const viaQuery = await call(key, 'shop', 'by-region', { query: `?region=${encodeURIComponent(region)}` });
        expect(viaQuery.status, `${region}: ${viaQuery.text}`).toBe(200);
        expect(viaQuery.body.rows, region).toEqual([]);
        const viaBody = await call(key, 'shop', 'by-region', { body: { region } });
        expect(viaBody.body.rows, region).toEqual([]);
        const viaLookup = await call(key, 'shop', 'customer', { query: `?region=${encodeURIComponent(region)}` });
        expect(viaLookup.status, `${region}: ${viaLookup.text}`).toBe(200);
        expect(viaLookup.body.rows, region).toEqual([]);
      }
      // A quote in a real value matches that value.
      expect((await call(key, 'shop', 'customer', { query: '?region=APAC' })).body.rows).toEqual([{ id: 4, name: "O'Hara", region: 'APAC' }]);
      expectField(await call(key, 'shop', 'by-region', { body: { region: 'EU\u0000' } }), 400, 'body.region');
      expectField(await call(key, 'shop', 'by-region', { query: '?region=EU%00' }), 400, 'query.region');
      expectField(await call(key, 'shop', 'customer', { body: { region: 'EU\u0000' } }), 400, 'body.region');
      const huge = await call(key, 'shop', 'by-region', { body: { region: 'x'.repeat(50_000) } });
      expectField(huge, 400, 'body.region');
      expect(huge.text.length).toBeLessThan(2000);
      expectField(await call(key, 'shop', 'by-region', { body: { region: 'EU', min_id: 1e300 } }), 400, 'body.min_id');
      expectField(await call(key, 'shop', 'by-region', { query: `?region=EU&min_id=${'9'.repeat(400)}` }), 400, 'query.min_id');
      // Everything still there.
      const rows = await t.request('GET', `/api/datasets/${customersId}/rows?limit=10`);
      expect(rows.body.rows).toHaveLength(CUSTOMERS.length);
    });

    it('looks up one key or a batch in input order, 0..n rows per key', async () => {
      const one = await call(key, 'shop', 'customer', { query: '?region=EU' });
      expect(one.status, one.text).toBe(200);
      expect(one.body).toEqual({ key: { region: 'EU' }, rows: [{ id: 1, name: 'Ada', region: 'EU' }, { id: 3, name: 'Cyd', region: 'EU' }] });
      const batch = await call(key, 'shop', 'customer', { body: { keys: [{ region: 'US' }, { region: 'Mars' }, { region: 'EU' }] } });
      expect(batch.status, batch.text).toBe(200);
      expect(batch.body.results.map((r: { key: unknown; rows: { id: number }[] }) => [r.key, r.rows.map((row) => row.id)])).toEqual([
        [{ region: 'US' }, [2]],
        [{ region: 'Mars' }, []],
        [{ region: 'EU' }, [1, 3]],
      ]);
      expectField(await call(key, 'shop', 'customer', { body: { keys: [{ region: 'EU' }, { nation: 'EU' }] } }), 400, 'body.keys.1.nation');
      expectField(await call(key, 'shop', 'customer', { body: { keys: [{ region: 'EU' }, {}] } }), 400, 'body.keys.1.region');
      expectField(await call(key, 'shop', 'customer', { body: { keys: [] } }), 400, 'body.keys');
      expectField(await call(key, 'shop', 'customer', { body: { keys: Array.from({ length: 101 }, () => ({ region: 'EU' })) } }), 400, 'body.keys');
      expectField(await call(key, 'shop', 'customer-by-id', { query: '?id=abc' }), 400, 'query.id');
      expectField(await call(key, 'shop', 'customer', { query: '' }), 400, 'query.region');
    });

    it('answers one row per key with on_multiple first, and 409 with error', async () => {
      expect((await call(key, 'shop', 'first-customer', { query: '?region=EU' })).body.rows).toEqual([{ id: 1, name: 'Ada' }]);
      const refused = await call(key, 'shop', 'one-customer', { query: '?region=EU' });
      expect(refused.status).toBe(409);
      expect(refused.body.detail).toMatch(/more than one row/);
      expect((await call(key, 'shop', 'one-customer', { query: '?region=US' })).body.rows).toEqual([{ id: 2, name: 'Bob' }]);
      expect((await call(key, 'shop', 'one-customer', { query: '?region=Mars' })).body.rows).toEqual([]);
    });

    it('unmasks only the PII columns an endpoint lists, when its publisher may see them', async () => {
      // The platform admin published: customer-by-id lists email, the sql endpoint does not.
      expect((await call(key, 'shop', 'customer-by-id', { query: '?id=2' })).body.rows).toEqual([{ id: 2, email: 'bob@example.test' }]);
      expect((await call(key, 'shop', 'by-region', { query: '?region=US' })).body.rows).toEqual([{ id: 2, name: 'Bob', email: '***' }]);
    });

    it('answers 409 for a model endpoint whose model has no ready version, and 501 for function endpoints', async () => {
      const model = await call(key, 'shop', 'score', { body: { rows: [{ x: 1 }] } });
      expect(model.status, model.text).toBe(409);
      expect((await call(key, 'shop', 'later')).status).toBe(501);
    });

    it('predicts through model endpoints: an ONNX model made elsewhere, pinned, and one trained here, active; rows checked', async () => {
      const iris = await importedModel(t, projectId, 'iris');
      expect((await importOnnx(t, iris, IRIS_ONNX)).status).toBe(201);
      const line = await t.request('POST', '/api/datasets', { body: { name: 'line', project_id: projectId, columns: [{ name: 'x', type: 'number' }, { name: 'y', type: 'number' }] } });
      expect((await t.request('POST', `/api/datasets/${line.body.id}/rows`, { body: Array.from({ length: 40 }, (_, i) => ({ x: i, y: 2 * i + 1 })) })).status).toBe(200);
      const training = await t.request('POST', '/api/registry/models', { body: { project_id: projectId, name: 'line', dataset_id: line.body.id, target: 'y', features: ['x'], task: 'regression', algorithm: 'linear', params: {}, test_ratio: 0.2, seed: 1 } });
      expect(training.status, training.text).toBe(202);
      expect((await finished(t, training.body.run.id, 60_000)).status).toBe('succeeded');

      const endpoints = [
        { name: 'species', kind: 'model', config: { model_id: iris, version: 1 } },
        { name: 'line', kind: 'model', config: { model_id: training.body.model.id } },
      ];
      const created = await create({ project_id: projectId, name: 'Scoring', key: 'scoring', endpoints });
      expect(created.status, created.text).toBe(201);
      await publish(created.body.id);
      const { key: scoring } = await mint(created.body.id);
      const species = await call(scoring, 'scoring', 'species', { body: { rows: IRIS_ROWS } });
      expect(species.status, species.text).toBe(200);
      expect(species.body).toMatchObject({ predictions: ['setosa', 'versicolor', 'virginica'], version: 1 });
      const fitted = await call(scoring, 'scoring', 'line', { body: { rows: [{ x: 10 }, { x: 100 }] } });
      expect(fitted.status, fitted.text).toBe(200);
      expect(fitted.body.predictions[0]).toBeCloseTo(21, 3);
      expect(fitted.body.predictions[1]).toBeCloseTo(201, 3);
      // Bad input: 400 naming the row and field, the rows, or an input the endpoint does not take.
      expectField(await call(scoring, 'scoring', 'line', { body: { rows: [{ x: 1 }, { x: 'two' }] } }), 400, 'body.rows.1.x');
      expectField(await call(scoring, 'scoring', 'line', { body: { rows: [] } }), 400, 'body.rows');
      expectField(await call(scoring, 'scoring', 'line', { body: { rows: [[1]] } }), 400, 'body.rows');
      expectField(await call(scoring, 'scoring', 'line', { query: '?x=1' }), 400, 'body.rows');
      expectField(await call(scoring, 'scoring', 'line', { body: { rows: [{ x: 1 }], threshold: 2 } }), 400, 'body.threshold');
    });
  });

  describe('data API keys', () => {
    /** A second published service of the same organization. */
    let other: { id: number; key: string };
    beforeAll(async () => {
      if ((await t.request('GET', `${BASE}/${shop.id}`)).body.status !== 'published') await publish(shop.id);
      other = (await create({ project_id: projectId, name: 'Other', key: 'other', endpoints: [SQL_ENDPOINT] })).body;
      await publish(other.id);
    });

    it('shows the dpk_ secret once, lists keys without it (with last_used_at), and audits mint and revoke', async () => {
      const minted = await mint(shop.id, { name: 'reporting' });
      expect(minted.key).toMatch(/^dpk_[A-Za-z0-9_-]{43}$/);
      expect(minted).toMatchObject({ name: 'reporting', allowed_endpoints: null, fixed_params: {}, state: 'active', last_used_at: null });
      expect((await call(minted.key, 'shop', 'by-region', { query: '?region=EU' })).status).toBe(200);
      const listed = await t.request('GET', `${BASE}/${shop.id}/keys`);
      expect(listed.text).not.toContain(minted.key);
      const row = listed.body.items.find((k: { id: number }) => k.id === minted.id);
      expect(row).toMatchObject({ name: 'reporting', key_prefix: minted.key.slice(0, 10), last_used_at: expect.any(String) });
      expect(row.key).toBeUndefined();
      expect((await t.request('DELETE', `${BASE}/${shop.id}/keys/${minted.id}`)).status).toBe(204);
      const audit = await t.request('GET', '/api/audit?limit=500');
      const actions = audit.body.items.filter((e: { target_id: string }) => e.target_id === String(minted.id)).map((e: { action: string }) => e.action);
      expect(actions).toEqual(expect.arrayContaining(['publishing.key.mint', 'publishing.key.revoke']));
      expect(audit.text).not.toContain(minted.key);
    });

    it('refuses bad key fields, naming the field', async () => {
      const bad = (body: Record<string, unknown>) => t.request('POST', `${BASE}/${shop.id}/keys`, { body: { name: 'k', ...body } });
      expectField(await bad({ allowed_endpoints: ['by-region', 'ghost'] }), 400, 'body.allowed_endpoints.1');
      expectField(await bad({ expires_at: '2001-01-01T00:00:00Z' }), 400, 'body.expires_at');
      expectField(await bad({ expires_at: 'tomorrow' }), 400, 'body.expires_at');
      expectField(await bad({ rate_limit_per_min: 0 }), 400, 'body.rate_limit_per_min');
      // A fixed parameter must apply to every endpoint the key may call.
      expectField(await bad({ fixed_params: { min_id: 2 } }), 400, 'body.fixed_params.min_id');
      expectField(await bad({ allowed_endpoints: ['by-region'], fixed_params: { tier: 'gold' } }), 400, 'body.fixed_params.tier');
      expectField(await bad({ allowed_endpoints: ['by-region'], fixed_params: { min_id: 'one' } }), 400, 'body.fixed_params.min_id');
      expect((await t.request('POST', `${BASE}/999999/keys`, { body: { name: 'k' } })).status).toBe(404);
    });

    it('limits a key to its allowed_endpoints (403 elsewhere)', async () => {
      const { key } = await mint(shop.id, { allowed_endpoints: ['customer'] });
      expect((await call(key, 'shop', 'customer', { query: '?region=EU' })).status).toBe(200);
      const refused = await call(key, 'shop', 'by-region', { query: '?region=EU' });
      expect(refused.status).toBe(403);
      expect(refused.body.detail).toMatch(/allowed_endpoints/);
      // An endpoint that does not exist is refused the same: the key learns no endpoint names.
      const unknown = await call(key, 'shop', 'no-such-endpoint', { query: '?region=EU' });
      expect(unknown.status, unknown.text).toBe(403);
      expect(unknown.body.detail).toMatch(/allowed_endpoints/);
    });

    it('applies fixed_params to every call, and never lets the caller override them', async () => {
      const { key } = await mint(shop.id, { allowed_endpoints: ['by-region', 'customer'], fixed_params: { region: 'EU' } });
      // The SQL parameter and the lookup key are the key's.
      expect((await call(key, 'shop', 'by-region')).body.rows.map((r: { id: number }) => r.id)).toEqual([1, 3]);
      expect((await call(key, 'shop', 'by-region', { query: '?min_id=2' })).body.rows.map((r: { id: number }) => r.id)).toEqual([3]);
      expect((await call(key, 'shop', 'customer')).body.rows.map((r: { id: number }) => r.id)).toEqual([1, 3]);
      expectField(await call(key, 'shop', 'by-region', { query: '?region=US' }), 400, 'query.region');
      expectField(await call(key, 'shop', 'by-region', { body: { region: 'US' } }), 400, 'body.region');
      expectField(await call(key, 'shop', 'customer', { body: { keys: [{ region: 'US' }] } }), 400, 'body.keys.0.region');
      // A fixed column that is no key column filters the lookup's rows.
      const gold = await mint(shop.id, { allowed_endpoints: ['customer'], fixed_params: { tier: 'silver' } });
      expect((await call(gold.key, 'shop', 'customer', { body: { keys: [{ region: 'EU' }, { region: 'US' }] } })).body.results.map((r: { rows: unknown[] }) => r.rows.length)).toEqual([0, 1]);
    });

    it('refuses a key whose fixed parameter its endpoint no longer takes (403), rather than widen its scope', async () => {
      const scoped = await create({ project_id: projectId, name: 'Scoped', key: 'scoped', endpoints: [SQL_ENDPOINT] });
      await publish(scoped.body.id);
      const { key } = await mint(scoped.body.id, { fixed_params: { region: 'US' } });
      expect((await call(key, 'scoped', 'by-region')).body.rows.map((r: { id: number }) => r.id)).toEqual([2]);
      const widened = { ...SQL_ENDPOINT, config: { query: 'select id from customers order by id' } };
      expect((await t.request('PATCH', `${BASE}/${scoped.body.id}`, { body: { endpoints: [widened] } })).status).toBe(200);
      const refused = await call(key, 'scoped', 'by-region');
      expect(refused.status).toBe(403);
      expect(refused.body.detail).toMatch(/fixes "region"/);
    });

    it('refuses a key once expired or revoked, on its very next call (401)', async () => {
      const expiring = await mint(shop.id, { expires_at: new Date(Date.now() + 3_600_000).toISOString() });
      expect((await call(expiring.key, 'shop', 'by-region', { query: '?region=EU' })).status).toBe(200);
      await t.kernel.storage.db.updateTable('publishing_keys').set({ expires_at: new Date(Date.now() - 1000).toISOString() }).where('id', '=', expiring.id).execute();
      expect((await call(expiring.key, 'shop', 'by-region', { query: '?region=EU' })).status).toBe(401);
      expect((await t.request('GET', `${BASE}/${shop.id}/keys`)).body.items.find((k: { id: number }) => k.id === expiring.id).state).toBe('expired');

      const revoked = await mint(shop.id);
      expect((await call(revoked.key, 'shop', 'by-region', { query: '?region=EU' })).status).toBe(200);
      expect((await t.request('DELETE', `${BASE}/${shop.id}/keys/${revoked.id}`)).status).toBe(204);
      expect((await call(revoked.key, 'shop', 'by-region', { query: '?region=EU' })).status).toBe(401);
    });

    it('refuses no key, an unknown key and a bearer token (401), and a key of service A on service B (403)', async () => {
      expect((await call(null, 'shop', 'by-region', { query: '?region=EU' })).status).toBe(401);
      expect((await call('dpk_unknown', 'shop', 'by-region', { query: '?region=EU' })).status).toBe(401);
      expect((await call(null, 'shop', 'by-region', { query: '?region=EU', token: t.adminToken })).status).toBe(401);
      const { key } = await mint(shop.id);
      const refused = await call(key, 'other', 'by-region', { query: '?region=EU' });
      expect(refused.status).toBe(403);
      expect(refused.body.detail).toMatch(/another API Service/);
      const { key: otherKey } = await mint(other.id);
      expect((await call(otherKey, 'other', 'by-region', { query: '?region=EU' })).status).toBe(200);
      expect((await call(otherKey, 'shop', 'by-region', { query: '?region=EU' })).status).toBe(403);
    });

    it('keeps another organization\u2019s services unreachable, both ways', async () => {
      const outsider = await t.outsider('service-outsider');
      const project = await t.request('POST', '/api/projects', { token: outsider.token, body: { key: 'OUT', name: 'Out' } });
      const theirs = await create({ project_id: project.body.id, name: 'Theirs', key: 'theirs', endpoints: [{ name: 'f', kind: 'function', config: {} }] }, outsider.token);
      expect(theirs.status, theirs.text).toBe(201);
      await publish(theirs.body.id, outsider.token);
      const theirKey = (await t.request('POST', `${BASE}/${theirs.body.id}/keys`, { token: outsider.token, body: { name: 'theirs' } })).body.key;
      expect((await call(theirKey, 'theirs', 'f')).status).toBe(501);
      const { key } = await mint(shop.id);
      expect((await call(key, 'theirs', 'f')).status).toBe(404);
      expect((await call(theirKey, 'shop', 'by-region', { query: '?region=EU' })).status).toBe(404);
      // Nor can a model endpoint of theirs name our model (nor ours theirs).
      const theirModel = await t.request('POST', '/api/registry/imported-models', { token: outsider.token, body: { project_id: project.body.id, name: 'theirs', task: 'regression' } });
      expect(theirModel.status, theirModel.text).toBe(201);
      const modelEndpoint = (id: number) => [{ name: 'm', kind: 'model', config: { model_id: id } }];
      expectField(await create({ project_id: project.body.id, name: 'Borrowed', key: 'borrowed-model', endpoints: modelEndpoint(modelId) }, outsider.token), 422, 'body.endpoints.0.config.model_id');
      expectField(await t.request('PATCH', `${BASE}/${shop.id}`, { body: { endpoints: modelEndpoint(theirModel.body.id) } }), 422, 'body.endpoints.0.config.model_id');
      expect((await create({ project_id: project.body.id, name: 'Own', key: 'own-model', endpoints: modelEndpoint(theirModel.body.id) }, outsider.token)).status).toBe(201);
      // Nor can they manage ours.
      expect((await t.request('GET', `${BASE}/${shop.id}`, { token: outsider.token })).status).toBe(404);
      expect((await t.request('POST', `${BASE}/${shop.id}/keys`, { token: outsider.token, body: { name: 'stolen' } })).status).toBe(404);
    });

    it('holds each key to its rate_limit_per_min (429 with Retry-After)', async () => {
      const { key } = await mint(shop.id, { rate_limit_per_min: 2 });
      expect((await call(key, 'shop', 'by-region', { query: '?region=EU' })).status).toBe(200);
      expect((await call(key, 'shop', 'by-region', { query: '?region=EU' })).status).toBe(200);
      const third = await call(key, 'shop', 'by-region', { query: '?region=EU' });
      expect(third.status).toBe(429);
      expect(Number(third.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    });
  });

  describe('the publisher\u2019s rights', () => {
    it('applies the publisher\u2019s row policies', async () => {
      const analyst = await t.userToken('editor', 'eu-analyst');
      const group = await t.request('POST', '/api/groups', { body: { name: 'eu-analysts', capabilities: [] } });
      expect((await t.request('POST', `/api/groups/${group.body.id}/members`, { body: { user_id: analyst.id } })).status).toBe(201);
      const accounts = await t.request('POST', '/api/datasets', { body: { name: 'accounts', project_id: projectId, columns: [{ name: 'id', type: 'integer' }, { name: 'region', type: 'string' }] } });
      await t.request('POST', `/api/datasets/${accounts.body.id}/rows`, { body: [{ id: 1, region: 'EU' }, { id: 2, region: 'US' }, { id: 3, region: 'EU' }] });
      const policy = await t.request('POST', `/api/datasets/${accounts.body.id}/row-policies`, { body: { group_id: group.body.id, filters: ['region:eq:EU'] } });
      expect(policy.status, policy.text).toBe(201);
      const endpoints = [
        { name: 'by-region', kind: 'lookup', config: { dataset_id: accounts.body.id, keys: ['region'] } },
        { name: 'all', kind: 'sql', config: { query: 'select id from accounts' } },
      ];
      const created = await create({ project_id: projectId, name: 'Accounts', key: 'accounts', endpoints }, analyst.token);
      await publish(created.body.id, analyst.token);
      const { key } = await mint(created.body.id, {}, analyst.token);
      expect((await call(key, 'accounts', 'by-region', { query: '?region=EU' })).body.rows.map((r: { id: number }) => r.id)).toEqual([1, 3]);
      expect((await call(key, 'accounts', 'by-region', { query: '?region=US' })).body.rows).toEqual([]);
      // Governed SQL over the row-filtered dataset, whose filter can now search the lookup's index.
      const all = await call(key, 'accounts', 'all');
      expect(all.status, all.text).toBe(200);
      expect(all.body.rows.map((r: { id: number }) => r.id).sort(), all.text).toEqual([1, 3]);
    });

    it('reads with the rights of whoever last changed a published service\u2019s endpoints, and only through keys that user minted', async () => {
      const endpoints = [lookup('by-id', { keys: ['id'], columns: ['id', 'email'], unmasked_columns: ['email'] })];
      const created = await create({ project_id: projectId, name: 'Handed over', key: 'handed-over', endpoints });
      await publish(created.body.id);
      const { key } = await mint(created.body.id);
      expect((await call(key, 'handed-over', 'by-id', { query: '?id=1' })).body.rows).toEqual([{ id: 1, email: 'ada@example.test' }]);
      // An editor (without datasets.pii.read) cannot borrow the admin's rights by changing the endpoints.
      const editor = await t.userToken('editor', 'late-editor');
      const changed = await t.request('PATCH', `${BASE}/${created.body.id}`, { token: editor.token, body: { endpoints } });
      expect(changed.status, changed.text).toBe(200);
      expect(changed.body.published_by).toBe(editor.id);
      // The admin's key lends nobody's rights now: 403 saying why, until the admin publishes again.
      const stale = await call(key, 'handed-over', 'by-id', { query: '?id=1' });
      expect(stale.status, stale.text).toBe(403);
      expect(stale.body.detail).toMatch(/minted by a user who no longer publishes "handed-over"/);
      // The editor's own key reads with the editor's rights.
      const { key: editorKey } = await mint(created.body.id, {}, editor.token);
      expect((await call(editorKey, 'handed-over', 'by-id', { query: '?id=1' })).body.rows).toEqual([{ id: 1, email: '***' }]);
      // Published again by the admin: the admin's key reads again, the editor's is the stale one.
      await publish(created.body.id);
      const admin = (await t.request('GET', `${BASE}/${created.body.id}`)).body.published_by;
      expect(admin).not.toBe(editor.id);
      expect((await call(key, 'handed-over', 'by-id', { query: '?id=1' })).body.rows).toEqual([{ id: 1, email: 'ada@example.test' }]);
      expect((await call(editorKey, 'handed-over', 'by-id', { query: '?id=1' })).status).toBe(403);
      // A new name only: the publisher stays.
      expect((await t.request('PATCH', `${BASE}/${created.body.id}`, { body: { name: 'Renamed' } })).body.published_by).toBe(admin);
    });

    it('lets only the publisher mint keys (403 naming why): nobody gets a key reading with another\u2019s rights', async () => {
      const endpoints = [lookup('by-id', { keys: ['id'], columns: ['id', 'email'], unmasked_columns: ['email'] })];
      const created = await create({ project_id: projectId, name: 'Admins', key: 'admins', endpoints });
      await publish(created.body.id);
      // An editor without datasets.pii.read may not mint a key reading as the admin who published it.
      const editor = await t.userToken('editor', 'key-borrower');
      const borrowed = await t.request('POST', `${BASE}/${created.body.id}/keys`, { token: editor.token, body: { name: 'borrowed' } });
      expect(borrowed.status, borrowed.text).toBe(403);
      expect(borrowed.body.detail).toMatch(/reads with the rights of its publisher.*only they may mint/);
      expect((await t.request('GET', `${BASE}/${created.body.id}/keys`)).body.items).toEqual([]);
      // Published by the editor, the service reads with the editor's rights, and the editor mints.
      await publish(created.body.id, editor.token);
      const { key } = await mint(created.body.id, {}, editor.token);
      expect((await call(key, 'admins', 'by-id', { query: '?id=1' })).body.rows).toEqual([{ id: 1, email: '***' }]);
      // Nor does the admin mint keys reading with the editor's rights.
      expect((await t.request('POST', `${BASE}/${created.body.id}/keys`, { body: { name: 'admin' } })).status).toBe(403);
    });

    it('reads with the scopes of the token it was published with: a PAT without datasets.pii.read publishes, and PII stays masked', async () => {
      const scopes = ['publishing.read', 'publishing.write', 'datasets.read'];
      const pat = await t.request('POST', '/api/auth/tokens', { body: { name: 'publish without pii', scopes } });
      expect(pat.status, pat.text).toBe(201);
      const endpoints = [lookup('by-id', { keys: ['id'], columns: ['id', 'email'], unmasked_columns: ['email'] })];
      const created = await create({ project_id: projectId, name: 'Scoped PAT', key: 'scoped-pat', endpoints }, pat.body.token);
      await publish(created.body.id, pat.body.token);
      const { key } = await mint(created.body.id, {}, pat.body.token);
      // The admin holds datasets.pii.read; the token it published with does not.
      expect((await call(key, 'scoped-pat', 'by-id', { query: '?id=1' })).body.rows).toEqual([{ id: 1, email: '***' }]);
      // Changing the endpoints with the same token keeps its scopes; publishing with the full session lends them all.
      expect((await t.request('PATCH', `${BASE}/${created.body.id}`, { token: pat.body.token, body: { endpoints } })).status).toBe(200);
      expect((await call(key, 'scoped-pat', 'by-id', { query: '?id=1' })).body.rows).toEqual([{ id: 1, email: '***' }]);
      await publish(created.body.id);
      expect((await call(key, 'scoped-pat', 'by-id', { query: '?id=1' })).body.rows).toEqual([{ id: 1, email: 'ada@example.test' }]);
    });

    it('reads with the rights of who published, checked on every call: PII stays masked without datasets.pii.read, and a deactivated publisher is a 403', async () => {
      const editor = await t.userToken('editor', 'service-publisher');
      const created = await create({ project_id: projectId, name: 'Editor', key: 'editors', endpoints: [lookup('by-id', { keys: ['id'], columns: ['id', 'email'], unmasked_columns: ['email'] })] }, editor.token);
      expect(created.status, created.text).toBe(201);
      await publish(created.body.id, editor.token);
      const { key } = await mint(created.body.id, {}, editor.token);
      // The endpoint lists email, but its publisher may not see PII.
      expect((await call(key, 'editors', 'by-id', { query: '?id=1' })).body.rows).toEqual([{ id: 1, email: '***' }]);
      const deactivated = await t.request('PATCH', `/api/users/${editor.id}`, { body: { is_active: false } });
      expect(deactivated.status, deactivated.text).toBe(200);
      const refused = await call(key, 'editors', 'by-id', { query: '?id=1' });
      expect(refused.status).toBe(403);
      expect(refused.body.detail).toMatch(/published it.*service-publisher is deactivated/);
    });

    it('refuses the calls of a service whose publisher left the organization (403)', async () => {
      const leaver = await t.userToken('editor', 'leaving-publisher');
      const created = await create({ project_id: projectId, name: 'Leaver', key: 'leavers', endpoints: [lookup('by-id', { keys: ['id'], columns: ['id'] })] }, leaver.token);
      await publish(created.body.id, leaver.token);
      const { key } = await mint(created.body.id, {}, leaver.token);
      expect((await call(key, 'leavers', 'by-id', { query: '?id=1' })).body.rows).toEqual([{ id: 1 }]);
      expect((await t.request('DELETE', `/api/organizations/1/members/${leaver.id}`)).status).toBe(204);
      const refused = await call(key, 'leavers', 'by-id', { query: '?id=1' });
      expect(refused.status).toBe(403);
      expect(refused.body.detail).toMatch(/leaving-publisher is no longer a member of organization 1/);
    });
  });
});
