import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, until, type TestKernel, type TestResponse } from '../harness/index.ts';
import { emptyDataset, finished, loadDataset } from '../pipeline/pipeline-helpers.ts';
import { importOnnx, IRIS_FEATURES, IRIS_ONNX, IRIS_OUTPUT, IRIS_ROWS, irisLines } from './onnx-helpers.ts';

const BASE = '/api/publishing/api-services';
const IRIS_COLUMNS = ['id:integer', ...IRIS_FEATURES.map((f) => `${f.name}:number`), 'species:string'];

describe.each(DIALECTS)('API Services, review fixes (%s)', (dialect) => {
  let t: TestKernel;
  let project: number;
  let iris: number;
  /** A classifier whose version 1 failed (a single class) and version 2 is an ONNX import (ready). */
  let model: number;

  /** The errors of a refusal name exactly this field. */
  const expectField = (res: TestResponse, status: number, path: string) => {
    expect(res.status, res.text).toBe(status);
    expect(res.body.errors?.map((e: { path: string }) => e.path), res.text).toContain(path);
  };
  const service = (key: string, endpoints: unknown[]) => t.request('POST', BASE, { body: { project_id: project, name: key, key, endpoints } });
  const publish = async (id: number) => {
    const res = await t.request('POST', `${BASE}/${id}/publish`);
    expect(res.status, res.text).toBe(200);
  };
  const mint = async (id: number) => {
    const res = await t.request('POST', `${BASE}/${id}/keys`, { body: { name: 'review' } });
    expect(res.status, res.text).toBe(201);
    return res.body.key as string;
  };
  const call = (key: string, path: string, init: { body?: unknown; query?: string } = {}) =>
    t.request(init.body === undefined ? 'GET' : 'POST', `/api/service/${path}${init.query ?? ''}`, { token: null, body: init.body, headers: { 'x-api-key': key } });

  beforeAll(async () => {
    // Calls' queries here take milliseconds; the runaway one is stopped after 2 s.
    t = await startTestKernel({ dialect, env: { API_SERVICE_SQL_TIMEOUT_MS: '2000' } });
    project = (await t.request('POST', '/api/projects', { body: { key: 'REVIEW', name: 'Review' } })).body.id;
    iris = await loadDataset(t, project, 'iris', IRIS_COLUMNS, irisLines(5));
    const single = await loadDataset(t, project, 'one_class', ['id:integer', 'x:number', 'label:string'], Array.from({ length: 20 }, (_, i) => `${i},${i},same`));
    const started = await t.request('POST', '/api/registry/models', {
      body: { project_id: project, name: 'species', dataset_id: single, target: 'label', features: ['x'], task: 'classification', algorithm: 'decision_tree', params: {}, test_ratio: 0.2, seed: 1 },
    });
    expect(started.status, started.text).toBe(202);
    expect((await finished(t, started.body.run.id, 60_000)).status).toBe('failed');
    model = started.body.model.id;
    expect((await importOnnx(t, model, IRIS_ONNX)).status).toBe(201);
  });
  afterAll(async () => t?.stop());

  describe('a model endpoint or a predict recipe pinning a version', () => {
    it('refuses at save a pinned version that does not exist or is not ready (422 naming config.version)', async () => {
      const endpoint = (version: number) => ({ name: 'score', kind: 'model', config: { model_id: model, version } });
      expectField(await service('pin-failed', [endpoint(1)]), 422, 'body.endpoints.0.config.version');
      expectField(await service('pin-missing', [{ name: 'other', kind: 'function', config: {} }, endpoint(9)]), 422, 'body.endpoints.1.config.version');
      const ready = await service('pin-ready', [endpoint(2)]);
      expect(ready.status, ready.text).toBe(201);
      expectField(await t.request('PATCH', `${BASE}/${ready.body.id}`, { body: { endpoints: [endpoint(1)] } }), 422, 'body.endpoints.0.config.version');
      // The pinned version serves.
      await publish(ready.body.id);
      const scored = await call(await mint(ready.body.id), 'pin-ready/score', { body: { rows: IRIS_ROWS } });
      expect(scored.status, scored.text).toBe(200);
      expect(scored.body).toMatchObject({ predictions: ['setosa', 'versicolor', 'virginica'], version: 2 });
    });

    it('refuses a predict recipe pinning a version that failed (422 naming body.params.version)', async () => {
      const out = await emptyDataset(t, project, 'scored');
      const recipe = (version: number) => ({ project_id: project, name: `score v${version}`, type: 'predict', inputs: [iris], outputs: [out], params: { model_id: model, version } });
      expectField(await t.request('POST', '/api/pipeline/recipes', { body: recipe(1) }), 422, 'body.params.version');
      expect((await t.request('POST', '/api/pipeline/recipes', { body: recipe(2) })).status).toBe(201);
    });
  });

  describe('lookup indexes', () => {
    const tableOf = (datasetId: number) => t.kernel.storage.db.selectFrom('datasets').select(['table_name as table', 'org_id as orgId']).where('id', '=', datasetId).executeTakeFirstOrThrow();
    /** The indexes of the dataset's table, read from the database's catalog. */
    const indexesOf = async (datasetId: number): Promise<string[]> => {
      const db = t.kernel.storage.db;
      const { table, orgId } = await tableOf(datasetId);
      const { rows } =
        dialect === 'postgres'
          ? await sql<{ name: string }>`select indexname as name from pg_indexes where schemaname = ${`org_${orgId}`} and tablename = ${table}`.execute(db)
          : await sql<{ name: string }>`select name from sqlite_master where type = 'index' and tbl_name = ${`org_${orgId}__${table}`} and sql is not null`.execute(db);
      return rows.map((r) => r.name).filter((name) => name.startsWith('ix_'));
    };
    const upload = async (datasetId: number, csv: string, mode: 'append' | 'replace') => {
      const res = await t.request('POST', `/api/datasets/${datasetId}/data?mode=${mode}`, { body: csv, headers: { 'content-type': 'text/csv' } });
      expect(res.status, res.text).toBe(200);
    };

    it('indexes at publish and again once a load replaced the table, off the call path; calls create none', async () => {
      const stock = await loadDataset(t, project, 'stock', ['sku:string', 'qty:integer'], ['a-1,3', 'b-2,5']);
      const created = await service('stock', [{ name: 'by-sku', kind: 'lookup', config: { dataset_id: stock, keys: ['sku'] } }]);
      expect(created.status, created.text).toBe(201);
      expect(await indexesOf(stock)).toEqual([]);
      await publish(created.body.id);
      const [index] = await indexesOf(stock);
      expect(index).toMatch(/^ix_/);
      const key = await mint(created.body.id);

      await upload(stock, 'sku,qty\na-1,30\nc-3,7\n', 'replace');
      await until(() => indexesOf(stock), (names) => names.includes(index));
      const found = await call(key, 'stock/by-sku', { query: '?sku=c-3' });
      expect(found.status, found.text).toBe(200);
      expect(found.body.rows).toEqual([{ sku: 'c-3', qty: 7 }]);

      // A call never creates it: without the index, calls read without it.
      const { orgId } = await tableOf(stock);
      await sql`drop index ${dialect === 'postgres' ? sql.id(`org_${orgId}`, index) : sql.id(index)}`.execute(t.kernel.storage.db);
      expect((await call(key, 'stock/by-sku', { query: '?sku=a-1' })).body.rows).toEqual([{ sku: 'a-1', qty: 30 }]);
      expect(await indexesOf(stock)).toEqual([]);
      // An append keeps the table: the index is created again all the same (the event of any load).
      await upload(stock, 'sku,qty\nd-4,1\n', 'append');
      await until(() => indexesOf(stock), (names) => names.includes(index));
    });
  });

  describe('DataTables.index', () => {
    it('moves an index name left on a replaced table to the table asked, and builds again an index left invalid', async () => {
      const { db, dataTables } = t.kernel.storage;
      const orgId = 1;
      const tableOfIndex = async (name: string) => {
        const { rows } =
          dialect === 'postgres'
            ? await sql<{ table: string; valid: boolean }>`select t.relname as table, x.indisvalid as valid from pg_index x join pg_class i on i.oid = x.indexrelid join pg_class t on t.oid = x.indrelid where i.relname = ${name}`.execute(db)
            : await sql<{ table: string; valid: boolean }>`select tbl_name as "table", 1 as valid from sqlite_master where type = 'index' and name = ${name}`.execute(db);
        return rows.map((r) => ({ table: r.table.replace(/^org_\d+__/, ''), valid: Boolean(r.valid) }));
      };
      for (const table of ['review_old', 'review_new']) await dataTables.create(db, orgId, table, [{ name: 'k', type: 'string' }]);
      await dataTables.index(db, orgId, 'review_old', 'ix_review_k', ['k']);
      expect(await tableOfIndex('ix_review_k')).toEqual([{ table: 'review_old', valid: true }]);
      await dataTables.index(db, orgId, 'review_new', 'ix_review_k', ['k']);
      expect(await tableOfIndex('ix_review_k')).toEqual([{ table: 'review_new', valid: true }]);
      if (dialect === 'postgres') {
        // A unique build over duplicates fails, leaving its index invalid: asked again, it is built anew.
        await sql`insert into ${dataTables.ref(orgId, 'review_new')} (k) values ('x'), ('x')`.execute(db);
        await expect(sql`create unique index concurrently ix_review_bad on ${dataTables.ref(orgId, 'review_new')} (k)`.execute(db)).rejects.toThrow(/duplicate|unique/i);
        expect(await tableOfIndex('ix_review_bad')).toEqual([{ table: 'review_new', valid: false }]);
        await dataTables.index(db, orgId, 'review_new', 'ix_review_bad', ['k']);
        expect(await tableOfIndex('ix_review_bad')).toEqual([{ table: 'review_new', valid: true }]);
        await expect(db.transaction().execute((trx) => dataTables.index(trx, orgId, 'review_new', 'ix_review_k', ['k']))).rejects.toThrow(/transaction/);
      }
      for (const table of ['review_old', 'review_new']) await dataTables.drop(db, orgId, table);
    });
  });

  describe('imported model versions', () => {
    it('store no dataset: dataset_id and dataset_version are null, in the API and the database', async () => {
      const versions = await t.request('GET', `/api/registry/models/${model}/versions`);
      expect(versions.status, versions.text).toBe(200);
      const [trained, imported] = versions.body.items;
      expect(trained).toMatchObject({ version: 1, status: 'failed', dataset_id: expect.any(Number) });
      expect(imported).toMatchObject({ version: 2, algorithm: 'onnx', dataset_id: null, dataset_version: null });
      const stored = await t.kernel.storage.db.selectFrom('registry_model_versions').select(['version', 'dataset_id']).where('model_id', '=', model).orderBy('version').execute();
      expect(stored.map((r) => [Number(r.version), r.dataset_id === null ? null : Number(r.dataset_id)])).toEqual([
        [1, trained.dataset_id],
        [2, null],
      ]);
    });
  });

  describe('display names (one schema: trimmed, 1 to 200 characters, no control character)', () => {
    it('refuses the same names on every route naming a record, and trims the rest', async () => {
      const svc = await service('named', [{ name: 'f', kind: 'function', config: {} }]);
      expect(svc.status, svc.text).toBe(201);
      await publish(svc.body.id);
      const out = await emptyDataset(t, project, 'named_out');
      const routes: [string, Record<string, unknown>][] = [
        [BASE, { project_id: project, key: 'named-2', endpoints: [{ name: 'f', kind: 'function', config: {} }] }],
        [`${BASE}/${svc.body.id}/keys`, {}],
        ['/api/registry/imported-models', { project_id: project, task: 'classification' }],
        ['/api/registry/models', { project_id: project, dataset_id: iris, target: 'species', features: ['sepal_length'], task: 'classification', algorithm: 'decision_tree', params: {}, test_ratio: 0.2, seed: 1 }],
        ['/api/pipeline/recipes', { project_id: project, type: 'predict', inputs: [iris], outputs: [out], params: { model_id: model } }],
        ['/api/pipeline/jobs', { project_id: project, targets: [out] }],
        ['/api/pipeline/scenarios', { project_id: project, steps: [{ type: 'build', params: { datasets: [out] } }] }],
      ];
      for (const [path, body] of routes) {
        for (const name of ['   ', 'tab\there', 'esc\u001bape', 'x'.repeat(201), 42]) {
          expectField(await t.request('POST', path, { body: { ...body, name } }), 400, 'body.name');
        }
      }
      const named = await t.request('POST', '/api/registry/imported-models', { body: { project_id: project, task: 'regression', name: '  Padded \u00e9t\u00e9  ' } });
      expect([named.status, named.body.name], named.text).toEqual([201, 'Padded \u00e9t\u00e9']);
      const key = await t.request('POST', `${BASE}/${svc.body.id}/keys`, { body: { name: ` ${'k'.repeat(200)} ` } });
      expect([key.status, key.body.name], key.text).toEqual([201, 'k'.repeat(200)]);
    });
  });

  describe('column names holding ":" (the filter language separates with it)', () => {
    it('looks rows up by such a column exactly, whatever the value holds (a key is no filter text a value could re-split)', async () => {
      const columns = ['k', 'k:ne', 'a:b'].map((name) => ({ name, type: 'string' }));
      const dataset = await t.request('POST', '/api/datasets', { body: { project_id: project, name: 'colons', columns } });
      expect(dataset.status, dataset.text).toBe(201);
      const rows = [
        { k: 'x', 'k:ne': 'y', 'a:b': 'one' },
        { k: 'eq:x', 'k:ne': 'x', 'a:b': 'two' },
        { k: 'z', 'k:ne': 'z', 'a:b': 'three:eq:3' },
      ];
      expect((await t.request('POST', `/api/datasets/${dataset.body.id}/rows`, { body: rows })).status).toBe(200);
      const lookup = (keys: string[]) => ({ name: 'by', kind: 'lookup', config: { dataset_id: dataset.body.id, keys, columns: ['k'] } });
      const created = await service('colons', [lookup(['k:ne']), { ...lookup(['a:b']), name: 'by-ab' }, { ...lookup(['k']), name: 'by-k' }]);
      expect(created.status, created.text).toBe(201);
      await publish(created.body.id);
      const key = await mint(created.body.id);
      const found = async (endpoint: string, column: string, value: string) => (await call(key, `colons/${endpoint}`, { query: `?${encodeURIComponent(column)}=${encodeURIComponent(value)}` })).body.rows;
      // Read as a filter text, `k:ne:eq:x` would be k <> 'eq:x': every row but one.
      expect(await found('by', 'k:ne', 'x')).toEqual([{ k: 'eq:x' }]);
      expect(await found('by-ab', 'a:b', 'one')).toEqual([{ k: 'x' }]);
      expect(await found('by-ab', 'a:b', 'three:eq:3')).toEqual([{ k: 'z' }]);
      expect(await found('by-ab', 'a:b', 'ne:one')).toEqual([]);
      expect(await found('by-k', 'k', 'eq:x')).toEqual([{ k: 'eq:x' }]);
      // A batch by one column is one read, `in (…)` of its values, commas and colons included.
      const batch = await call(key, 'colons/by-ab', { body: { keys: [{ 'a:b': 'three:eq:3' }, { 'a:b': 'one' }, { 'a:b': 'a,b' }] } });
      expect(batch.body.results.map((r: { rows: unknown[] }) => r.rows), batch.text).toEqual([[{ k: 'z' }], [{ k: 'x' }], []]);
      // The rows API's filter text names the column up to its first `:`, as it always has, so a stored row policy never changes meaning.
      const filtered = (filter: string) => t.request('GET', `/api/datasets/${dataset.body.id}/rows?filter=${encodeURIComponent(filter)}`);
      expect((await filtered('k:ne:eq:x')).body.rows.map((r: { k: string }) => r.k)).toEqual(['x', 'z']);
      expectField(await filtered('a:b:eq:one'), 400, 'query.filter');
    });
  });

  describe('hostile inputs, second pass', () => {
    it('refuses instants an offset carries past year 9999 or before year 1, naming the input, on both adapters alike', async () => {
      const columns = [{ name: 'id', type: 'integer' }, { name: 'ts', type: 'timestamp' }];
      const dataset = await t.request('POST', '/api/datasets', { body: { project_id: project, name: 'instants', columns } });
      expect(dataset.status, dataset.text).toBe(201);
      expect((await t.request('POST', `/api/datasets/${dataset.body.id}/rows`, { body: [{ id: 1, ts: '2024-05-01T00:00:00Z' }] })).status).toBe(200);
      const past = '9999-12-31T23:59:59-23:59';
      const before = '0001-01-01T00:00:00+14:00';
      const sqlEndpoint = { name: 'since', kind: 'sql', config: { query: 'select id from instants where ts > $1', params: [{ name: 'since', type: 'timestamp', required: true }] } };
      const lookupEndpoint = { name: 'at', kind: 'lookup', config: { dataset_id: dataset.body.id, keys: ['ts'] } };
      expectField(await service('instants-filter', [{ name: 'later', kind: 'lookup', config: { dataset_id: dataset.body.id, keys: ['id'], filters: [`ts:gt:${past}`] } }]), 400, 'body.endpoints.0.config.filters.0');
      const created = await service('instants', [sqlEndpoint, lookupEndpoint]);
      expect(created.status, created.text).toBe(201);
      await publish(created.body.id);
      const key = await mint(created.body.id);
      for (const instant of [past, before]) {
        expectField(await call(key, 'instants/since', { query: `?since=${encodeURIComponent(instant)}` }), 400, 'query.since');
        expectField(await call(key, 'instants/at', { query: `?ts=${encodeURIComponent(instant)}` }), 400, 'query.ts');
      }
      expect((await call(key, 'instants/since', { query: `?since=${encodeURIComponent('2024-01-01T00:00:00+14:00')}` })).body.rows).toEqual([{ id: 1 }]);
      const keys = async () => (await t.request('GET', `${BASE}/${created.body.id}/keys`)).body.items.length;
      const minted = await keys();
      expectField(await t.request('POST', `${BASE}/${created.body.id}/keys`, { body: { name: 'forever', expires_at: past } }), 400, 'body.expires_at');
      expect(await keys()).toBe(minted);
    });

    it('names the inputs, not a `body.sql` the caller never sent, when the database refuses the query for them', async () => {
      const endpoint = { name: 'first', kind: 'sql', config: { query: 'select id from iris where id > 10 / $1 and id < 5 order by id', params: [{ name: 'n', type: 'integer', required: true }] } };
      const created = await service('runtime-refusal', [endpoint]);
      expect(created.status, created.text).toBe(201);
      await publish(created.body.id);
      const key = await mint(created.body.id);
      expect((await call(key, 'runtime-refusal/first', { query: '?n=5' })).body.rows.map((r: { id: number }) => r.id)).toEqual([3, 4]);
      const negative = await call(key, 'runtime-refusal/first', { query: '?n=0' });
      // SQLite divides by zero into null (no row); Postgres refuses it.
      if (dialect === 'sqlite') expect(negative.status, negative.text).toBe(200);
      else expect([negative.status, negative.body.errors?.map((e: { path: string }) => e.path)], negative.text).toEqual([400, ['query']]);
      const dryRun = await t.request('POST', `${BASE}/${created.body.id}/endpoints/first/test`, { body: { body: { n: 0 } } });
      if (dialect === 'postgres') expect([dryRun.status, dryRun.body.errors?.map((e: { path: string }) => e.path)], dryRun.text).toEqual([400, ['body']]);
    });

    it('stops a query running past API_SERVICE_SQL_TIMEOUT_MS with a 504, on a call and a dry run', async () => {
      // Described at save with `upto` null (no row past the first); called with a bound no query reaches.
      const query = 'with recursive r(n) as (select 1 union all select n + 1 from r where n < $1) select count(*) as n from r';
      const runaway = { name: 'forever', kind: 'sql', config: { query, params: [{ name: 'upto', type: 'integer', required: true }] } };
      const created = await service('runaway', [runaway]);
      expect(created.status, created.text).toBe(201);
      await publish(created.body.id);
      const key = await mint(created.body.id);
      expect((await call(key, 'runaway/forever', { query: '?upto=3' })).body.rows).toEqual([{ n: 3 }]);
      const answer = await call(key, 'runaway/forever', { query: '?upto=2000000000' });
      expect([answer.status, answer.body.detail], answer.text).toEqual([504, 'the query ran longer than 2000 ms and was stopped']);
      const dryRun = await t.request('POST', `${BASE}/${created.body.id}/endpoints/forever/test`, { body: { query: { upto: '2000000000' } } });
      expect(dryRun.status, dryRun.text).toBe(504);
    });

    it('refuses a lone surrogate in the names an ONNX import declares in its form fields (not a JSON body: the kernel does not see them)', async () => {
      const versions = async () => (await t.request('GET', `/api/registry/models/${model}/versions`)).body.items.length as number;
      const before = await versions();
      const label = await importOnnx(t, model, IRIS_ONNX, IRIS_FEATURES, { ...IRIS_OUTPUT, labels: ['setosa\ud800', 'versicolor', 'virginica'] });
      expect([label.status, label.body.errors?.map((e: { path: string }) => e.path)], label.text).toEqual([400, ['body.output.labels.0']]);
      const feature = await importOnnx(t, model, IRIS_ONNX, [{ ...IRIS_FEATURES[0], name: '\udc00' }, ...IRIS_FEATURES.slice(1)]);
      expect([feature.status, feature.body.errors?.map((e: { path: string }) => e.path)], feature.text).toEqual([400, ['body.features.0.name']]);
      expect(await versions()).toBe(before);
    });

    it('refuses a field it does not know when minting a key or saving a service, naming it (a misspelt scope would widen the key)', async () => {
      const created = await service('strict-fields', [{ name: 'fn', kind: 'function', config: {} }]);
      expect(created.status, created.text).toBe(201);
      await publish(created.body.id);
      expectField(await t.request('POST', `${BASE}/${created.body.id}/keys`, { body: { name: 'typo', allowed_endpoint: ['fn'] } }), 400, 'body.allowed_endpoint');
      expectField(await t.request('POST', `${BASE}/${created.body.id}/keys`, { body: { name: 'typo', fixed_param: { region: 'EU' } } }), 400, 'body.fixed_param');
      expect((await t.request('GET', `${BASE}/${created.body.id}/keys`)).body.items).toEqual([]);
      expectField(await t.request('PATCH', `${BASE}/${created.body.id}`, { body: { project_id: project, name: 'moved' } }), 400, 'body.project_id');
      expectField(await t.request('POST', BASE, { body: { project_id: project, name: 'n', key: 'strict-create', endpoints: [], status: 'published' } }), 400, 'body.status');
      expect((await t.request('GET', `${BASE}/${created.body.id}`)).body.name).toBe('strict-fields');
    });

    it('refuses a key fixing a parameter that a model or function endpoint it may call cannot take', async () => {
      const created = await service('fix-model', [
        { name: 'score', kind: 'model', config: { model_id: model } },
        { name: 'fn', kind: 'function', config: {} },
      ]);
      expect(created.status, created.text).toBe(201);
      await publish(created.body.id);
      for (const allowed of [['score'], ['fn'], null]) {
        expectField(await t.request('POST', `${BASE}/${created.body.id}/keys`, { body: { name: 'scoped', allowed_endpoints: allowed, fixed_params: { region: 'EU' } } }), 400, 'body.fixed_params.region');
      }
    });

    it('answers a refusal of a huge or deep input briefly, never echoing it whole', async () => {
      // As text: JSON.stringify itself cannot write 5,000 levels.
      const deep = `{"project_id": ${project}, "name": "deep", "key": "deep-config", "endpoints": [{"name": "fn", "kind": "function", "config": {"deep": ${'['.repeat(5000)}1${']'.repeat(5000)}}}]}`;
      const answers = [
        await t.request('POST', BASE, { body: deep }),
        await t.request('POST', BASE, { body: { project_id: project, name: 'x', key: 'huge-key', endpoints: [], ['k'.repeat(900_000)]: 1 } }),
        await t.request('POST', BASE, { body: { project_id: project, name: 'x', key: 'many', endpoints: [], ...Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, '\u0000'])) } }),
      ];
      for (const answer of answers) {
        expect(answer.status, answer.text.slice(0, 300)).toBe(400);
        expect(answer.text.length).toBeLessThan(40_000);
      }
      expect(answers[2].body.errors).toHaveLength(100);
      // A schema naming more fields than an answer lists (250 unknown ones and the empty endpoints) says how many there were, whatever the detail's length.
      const unknownFields = Object.fromEntries(Array.from({ length: 250 }, (_, i) => [`unknown_field_${i}_${'x'.repeat(40)}`, 1]));
      const many = await t.request('POST', BASE, { body: { project_id: project, name: 'x', key: 'many-fields', endpoints: [], ...unknownFields } });
      expect(many.status, many.text.slice(0, 300)).toBe(400);
      expect(many.body.errors).toHaveLength(100);
      expect(many.body.detail).toMatch(/ \(\d+ more characters\) \(the first 100 of 251 fields are listed\)$/);
      expect((await t.request('GET', `${BASE}?project_id=${project}`)).body.items.map((s: { key: string }) => s.key)).not.toContain('deep-config');
    });
  });

  describe('a JSON body holding __proto__', () => {
    it('is a 400 naming each such key, on the service path and on any route', async () => {
      const created = await service('proto', [{ name: 'score', kind: 'model', config: { model_id: model } }]);
      expect(created.status, created.text).toBe(201);
      await publish(created.body.id);
      const key = await mint(created.body.id);
      const raw = (path: string, body: string, headers: Record<string, string> = {}) => t.request('POST', path, { body, headers: { 'content-type': 'application/json', ...headers } });
      const onService = await t.request('POST', '/api/service/proto/score', { token: null, body: '{"__proto__": {"x": 1}}', headers: { 'content-type': 'application/json', 'x-api-key': key } });
      expect([onService.status, onService.body.errors], onService.text).toEqual([400, [{ path: 'body.__proto__', message: 'a key named __proto__ is not accepted' }]]);
      const nested = await t.request('POST', '/api/service/proto/score', { token: null, body: '{"rows": [{"sepal_length": 1}, {"\\u005f_proto__": null}]}', headers: { 'content-type': 'application/json', 'x-api-key': key } });
      expect([nested.status, nested.body.errors?.map((e: { path: string }) => e.path)], nested.text).toEqual([400, ['body.rows.1.__proto__']]);
      const project = await raw('/api/projects', '{"key": "P", "name": "p", "__proto__": {"admin": true}}');
      expect([project.status, project.body.errors?.map((e: { path: string }) => e.path)], project.text).toEqual([400, ['body.__proto__']]);
      // A body that is not JSON stays a 400 naming the body.
      expectField(await raw('/api/projects', '{"__proto__": '), 400, 'body');
    });
  });
});
