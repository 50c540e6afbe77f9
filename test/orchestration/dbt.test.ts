import { readFileSync } from 'node:fs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { finished } from '../pipeline/pipeline-helpers.ts';

const FIXTURES = new URL('../fixtures/dbt/', import.meta.url);
const fixture = (path: string) => readFileSync(new URL(path, FIXTURES), 'utf8');
const manifestOf = (name: string) => JSON.parse(fixture(`${name}/manifest.json`));

/** A multipart body with text fields and JSON files. */
function form(fields: Record<string, string>, files: Record<string, string>) {
  const boundary = 'dbt-boundary-7f3a';
  const parts = [
    ...Object.entries(fields).map(([name, value]) => `--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`),
    ...Object.entries(files).map(([name, value]) => `--${boundary}\r\ncontent-disposition: form-data; name="${name}"; filename="${name}.json"\r\ncontent-type: application/json\r\n\r\n${value}\r\n`),
  ];
  return { body: `${parts.join('')}--${boundary}--\r\n`, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

/** A minimal manifest of schema `version` holding `nodes` (and `sources`). */
function manifest(nodes: Record<string, unknown>[], version = 12, sources: Record<string, unknown>[] = []) {
  return {
    metadata: { dbt_schema_version: `https://schemas.getdbt.com/dbt/manifest/v${version}.json`, dbt_version: '1.8.0', project_name: 'tiny' },
    nodes: Object.fromEntries(nodes.map((n) => [n.unique_id, n])),
    sources: Object.fromEntries(sources.map((n) => [n.unique_id, n])),
  };
}
const seed = (name: string, extra: Record<string, unknown> = {}) => ({ unique_id: `seed.tiny.${name}`, resource_type: 'seed', name, package_name: 'tiny', alias: name, columns: {}, ...extra });
const model = (name: string, raw: string, depends: string[], extra: Record<string, unknown> = {}) => ({
  unique_id: `model.tiny.${name}`,
  resource_type: 'model',
  name,
  package_name: 'tiny',
  alias: name,
  language: 'sql',
  raw_code: raw,
  depends_on: { nodes: depends },
  columns: {},
  ...extra,
});

describe.each(DIALECTS)('dbt import (%s)', (dialect) => {
  let t: TestKernel;
  let projectId: number;
  let nextProject = 0;

  async function newProject(): Promise<number> {
    nextProject++;
    const res = await t.request('POST', '/api/projects', { body: { key: `DBT${nextProject}`, name: `dbt ${nextProject}` } });
    expect(res.status, res.text).toBe(201);
    return res.body.id;
  }
  async function importJson(body: Record<string, unknown>, token?: string) {
    return t.request('POST', '/api/dbt/imports', { body, token });
  }
  async function datasetByName(name: string) {
    const res = await t.request('GET', `/api/datasets?search=${name}&limit=500`);
    return (res.body.items as { id: number; name: string }[]).find((d) => d.name === name);
  }
  async function uploadSeed(name: string, csv: string) {
    const dataset = await datasetByName(name);
    expect(dataset, name).toBeDefined();
    const res = await t.request('POST', `/api/datasets/${dataset!.id}/data?mode=replace`, { body: csv, headers: { 'content-type': 'text/csv' } });
    expect(res.status, res.text).toBe(200);
  }

  beforeAll(async () => {
    t = await startTestKernel({ dialect, env: { DBT_MANIFEST_LIMIT: '2mb' } });
    projectId = await newProject();
  });
  afterAll(async () => t?.stop());

  it("imports jaffle_shop's parse manifest (v11, no compiled SQL), builds its models from the seeds and matches the project's row counts", async () => {
    const body = form({ project_id: String(projectId) }, { manifest: fixture('jaffle_shop_v11_parse/manifest.json') });
    const first = await t.request('POST', '/api/dbt/imports', body);
    expect(first.status, first.text).toBe(201);
    expect(first.body.summary).toMatchObject({ datasets_created: 8, recipes_created: 0, rules_created: 0 });
    // The seeds have no columns until loaded: the models reading them wait, and say why.
    const reasons = Object.fromEntries(first.body.summary.skipped.map((s: { unique_id: string; reason: string }) => [s.unique_id, s.reason]));
    expect(reasons['model.jaffle_shop.stg_customers']).toMatch(/seed\.jaffle_shop\.raw_customers .*no columns yet/);
    expect(reasons['model.jaffle_shop.customers']).toMatch(/depends on model\.jaffle_shop\.stg_\w+, which was skipped/);

    for (const seedName of ['raw_customers', 'raw_orders', 'raw_payments']) await uploadSeed(seedName, fixture(`jaffle_shop_v11_parse/${seedName}.csv`));
    const second = await t.request('POST', '/api/dbt/imports', body);
    expect(second.status, second.text).toBe(201);
    expect(second.body.summary, JSON.stringify(second.body.summary.skipped)).toMatchObject({ datasets_created: 0, recipes_created: 5, recipes_updated: 0, lineage_edges: 3 + 2 + 3, removed: [] });

    const customers = (await datasetByName('customers'))!;
    const orders = (await datasetByName('orders'))!;
    const job = await t.request('POST', '/api/pipeline/jobs', { body: { project_id: projectId, name: 'jaffle', targets: [customers.id, orders.id], mode: 'build_required' } });
    expect(job.status, job.text).toBe(201);
    const started = await t.request('POST', `/api/pipeline/jobs/${job.body.id}/run`);
    expect(started.status, started.text).toBe(202);
    const run = await finished(t, started.body.run.id, 60_000);
    expect(run.status, JSON.stringify(run)).toBe('succeeded');
    // Lineage follows from the recipes: customers ← stg_* ← the seeds.
    const upstream = await t.request('GET', `/api/lineage/datasets/${customers.id}?direction=upstream&depth=5`);
    expect(upstream.status, upstream.text).toBe(200);
    for (const name of ['stg_customers', 'stg_orders', 'stg_payments', 'raw_customers', 'raw_orders', 'raw_payments']) expect(upstream.text).toContain(`"${name}"`);
    // jaffle_shop's own counts: 100 customers, 99 orders.
    expect((await t.request('GET', `/api/datasets/${customers.id}`)).body.row_count).toBe(100);
    expect((await t.request('GET', `/api/datasets/${orders.id}`)).body.row_count).toBe(99);

    // Built, the models have columns: a third import adds their descriptions and the tests as rules, and duplicates nothing.
    const third = await t.request('POST', '/api/dbt/imports', body);
    expect(third.status, third.text).toBe(201);
    expect(third.body.summary, JSON.stringify(third.body.summary.skipped)).toMatchObject({ datasets_created: 0, recipes_created: 0, recipes_updated: 0, lineage_edges: 8 });
    // Its 20 generic tests: not_null, unique, accepted_values, and relationships as a condition over the referenced dataset.
    expect(third.body.summary).toMatchObject({ rules_created: 20, skipped: [] });
    const described = (await t.request('GET', `/api/datasets/${customers.id}`)).body;
    expect(described.description).toMatch(/basic information about a customer/);
    expect(described.columns.find((c: { name: string }) => c.name === 'customer_id').description).toBe('This is a unique identifier for a customer');
    const recipes = (await t.request('GET', `/api/pipeline/recipes?project_id=${projectId}`)).body.items;
    expect(recipes).toHaveLength(5);
    const rules = (await t.request('GET', `/api/data-quality/rules?dataset_id=${orders.id}`)).body;
    expect(rules.map((r: { type: string }) => r.type).sort()).toEqual(['allowed_values', 'custom_sql', 'not_null', 'not_null', 'not_null', 'not_null', 'not_null', 'not_null', 'not_null', 'unique']);
    // jaffle_shop's data passes its own tests here too.
    for (const rule of rules) {
      const run = await t.request('POST', `/api/data-quality/rules/${rule.id}/run`);
      expect(run.body.status, `${rule.name}: ${run.text}`).toBe('passed');
    }

    const listed = await t.request('GET', `/api/dbt/imports?project_id=${projectId}`);
    expect(listed.body.items.map((i: { id: number }) => i.id)).toEqual([third.body.id, second.body.id, first.body.id]);
    expect((await t.request('GET', `/api/dbt/imports/${first.body.id}`)).body.summary.datasets_created).toBe(8);
  }, 120_000);

  it('rewrites compiled SQL (v12, quoted relations) and renders the rest, building the same counts', async () => {
    const project = await newProject();
    const body = form({ project_id: String(project) }, { manifest: fixture('jaffle_shop_v12_compiled/manifest.json') });
    expect((await t.request('POST', '/api/dbt/imports', body)).status).toBe(201);
    const names = (await t.request('GET', `/api/datasets?project_id=${project}&limit=500`)).body.items.map((d: { name: string }) => d.name).sort();
    // Names are unique in the organization: the first project has the plain ones, this one's are told apart by resource type.
    expect(names).toEqual(['customers_model', 'orders_model', 'raw_customers_seed', 'raw_orders_seed', 'raw_payments_seed', 'stg_customers_model', 'stg_orders_model', 'stg_payments_model']);
    for (const seedName of ['raw_customers', 'raw_orders', 'raw_payments']) await uploadSeed(`${seedName}_seed`, fixture(`jaffle_shop_v12_compiled/${seedName}.csv`));
    const second = await t.request('POST', '/api/dbt/imports', body);
    expect(second.body.summary, JSON.stringify(second.body.summary.skipped)).toMatchObject({ recipes_created: 5, lineage_edges: 8 });
    const recipes = (await t.request('GET', `/api/pipeline/recipes?project_id=${project}`)).body.items as { name: string; params: { query: string }; outputs: number[] }[];
    const customers = recipes.find((r) => r.name === 'model.jaffle_shop.customers')!;
    expect(customers.params.query).toContain('select * from "stg_customers_model"');
    expect(customers.params.query).not.toContain('dbttry');
    const job = await t.request('POST', '/api/pipeline/jobs', { body: { project_id: project, name: 'jaffle', targets: [customers.outputs[0]], mode: 'build_required' } });
    const run = await finished(t, (await t.request('POST', `/api/pipeline/jobs/${job.body.id}/run`)).body.run.id, 60_000);
    expect(run.status, JSON.stringify(run)).toBe('succeeded');
    expect((await t.request('GET', `/api/datasets/${customers.outputs[0]}`)).body.row_count).toBe(100);
  }, 120_000);

  it('reads sources with catalog.json types (v9, JSON body), and renders the raw Jinja of a model compiled as an incremental run', async () => {
    const project = await newProject();
    const catalog = {
      nodes: {},
      sources: {
        'source.jaffle_shop.jaffle_shop.customers': { columns: { id: { name: 'id', type: 'NUMBER(38,0)' }, first_name: { name: 'first_name', type: 'VARCHAR' }, last_name: { name: 'last_name', type: 'VARCHAR' } } },
        'source.jaffle_shop.jaffle_shop.orders': { columns: { id: { name: 'id', type: 'NUMBER(38,0)' }, user_id: { name: 'user_id', type: 'NUMBER(38,0)' }, order_date: { name: 'order_date', type: 'DATE' }, status: { name: 'status', type: 'VARCHAR' }, _etl_loaded_at: { name: '_etl_loaded_at', type: 'TIMESTAMP_NTZ' } } },
        'source.jaffle_shop.jaffle_shop.payment': { columns: { id: { name: 'id', type: 'NUMBER(38,0)' }, orderid: { name: 'orderid', type: 'NUMBER(38,0)' }, paymentmethod: { name: 'paymentmethod', type: 'VARCHAR' }, status: { name: 'status', type: 'VARCHAR' }, amount: { name: 'amount', type: 'NUMBER(38,0)' }, created: { name: 'created', type: 'DATE' } } },
      },
    };
    const res = await importJson({ project_id: project, manifest: manifestOf('jaffle_shop_v9_compiled'), catalog });
    expect(res.status, res.text).toBe(201);
    expect(res.body.schema_version).toBe(9);
    expect(res.body.summary, JSON.stringify(res.body.summary.skipped)).toMatchObject({ datasets_created: 7, recipes_created: 4, lineage_edges: 6 });
    const orders = (await t.request('GET', `/api/datasets?project_id=${project}&search=orders&limit=50`)).body.items.find((d: { name: string }) => d.name.startsWith('orders'));
    expect(orders.columns.map((c: { name: string; type: string }) => `${c.name}:${c.type}`)).toEqual(['id:integer', 'user_id:integer', 'order_date:date', 'status:string', '_etl_loaded_at:timestamp']);
    const recipes = (await t.request('GET', `/api/pipeline/recipes?project_id=${project}`)).body.items as { name: string; params: { query: string } }[];
    const stgOrders = recipes.find((r) => r.name === 'model.jaffle_shop.stg_orders')!;
    expect(stgOrders.params.query).not.toMatch(/_ETL_LOADED_AT >|ANALYTICS/);
    expect(recipes.find((r) => r.name === 'model.jaffle_shop.stg_customers')!.params.query).toMatch(/FROM\s+"customers\w*"/);
  }, 60_000);

  /**
   * jaffle_shop end to end from one of its manifests, in a new project: imported (8 datasets, the
   * models waiting for the seeds), jaffle_shop's seeds loaded, imported again (5 recipes, no
   * relation of dbt's warehouse left), built here with dbt's row counts, imported a third time
   * (the 20 tests as rules, which its data passes). Answers the three imports and the recipes.
   */
  async function jaffleEndToEnd(manifestText: string) {
    const project = await newProject();
    const body = form({ project_id: String(project) }, { manifest: manifestText });
    const datasets = async () => (await t.request('GET', `/api/datasets?project_id=${project}&limit=500`)).body.items as { id: number; name: string }[];
    // Names other projects took first get a suffix: each resource's dataset starts with its name.
    const named = async (name: string) => (await datasets()).find((d) => d.name === name || d.name.startsWith(`${name}_`))!;
    const first = await t.request('POST', '/api/dbt/imports', body);
    expect(first.status, first.text).toBe(201);
    expect(first.body.summary).toMatchObject({ datasets_created: 8, recipes_created: 0, rules_created: 0 });
    const waiting: Record<string, string> = Object.fromEntries(first.body.summary.skipped.map((s: { unique_id: string; reason: string }) => [s.unique_id, s.reason]));
    expect(waiting['model.jaffle_shop.stg_payments']).toMatch(/seed\.jaffle_shop\.raw_payments .*no columns yet/);
    expect(waiting['model.jaffle_shop.orders']).toMatch(/depends on model\.jaffle_shop\.stg_\w+, which was skipped/);
    // The 5 models wait for the seeds, the 20 tests for their models' columns.
    const tests = Object.entries(waiting).filter(([id]) => id.startsWith('test.'));
    expect([Object.keys(waiting).length, tests.length]).toEqual([25, 20]);
    for (const [id, reason] of tests) expect(reason, id).toMatch(/column/);

    for (const seedName of ['raw_customers', 'raw_orders', 'raw_payments']) {
      const res = await t.request('POST', `/api/datasets/${(await named(seedName)).id}/data?mode=replace`, { body: fixture(`jaffle_shop_v11_parse/${seedName}.csv`), headers: { 'content-type': 'text/csv' } });
      expect(res.status, res.text).toBe(200);
    }
    const second = await t.request('POST', '/api/dbt/imports', body);
    expect(second.status, second.text).toBe(201);
    expect(second.body.summary, JSON.stringify(second.body.summary.skipped)).toMatchObject({ datasets_created: 0, recipes_created: 5, recipes_updated: 0, lineage_edges: 8, removed: [] });
    const recipes = (await t.request('GET', `/api/pipeline/recipes?project_id=${project}`)).body.items as { name: string; params: { query: string }; inputs: number[]; outputs: number[] }[];

    const targets = [(await named('customers')).id, (await named('orders')).id];
    const job = await t.request('POST', '/api/pipeline/jobs', { body: { project_id: project, name: 'jaffle', targets, mode: 'build_required' } });
    expect(job.status, job.text).toBe(201);
    const run = await finished(t, (await t.request('POST', `/api/pipeline/jobs/${job.body.id}/run`)).body.run.id, 60_000);
    expect(run.status, JSON.stringify(run)).toBe('succeeded');
    // jaffle_shop's own counts, model by model.
    const counts: Record<string, number> = {};
    for (const name of ['stg_customers', 'stg_orders', 'stg_payments', 'customers', 'orders']) counts[name] = (await t.request('GET', `/api/datasets/${(await named(name)).id}`)).body.row_count;
    expect(counts).toEqual({ stg_customers: 100, stg_orders: 99, stg_payments: 113, customers: 100, orders: 99 });

    const third = await t.request('POST', '/api/dbt/imports', body);
    expect(third.status, third.text).toBe(201);
    expect(third.body.summary).toMatchObject({ datasets_created: 0, recipes_created: 0, recipes_updated: 0, lineage_edges: 8, rules_created: 20, skipped: [] });
    for (const dataset of await datasets()) {
      for (const rule of (await t.request('GET', `/api/data-quality/rules?dataset_id=${dataset.id}`)).body) {
        const checked = await t.request('POST', `/api/data-quality/rules/${rule.id}/run`);
        expect(checked.body.status, `${rule.name}: ${checked.text}`).toBe('passed');
      }
    }
    return { first: first.body, second: second.body, third: third.body, recipes };
  }

  it("reads a v7 manifest (dbt 1.3, Postgres): seeds without relation_name, compiled SQL rewritten, jaffle_shop's counts built", async () => {
    const { first, recipes } = await jaffleEndToEnd(fixture('jaffle_shop_v7_compiled/manifest.json'));
    expect(first).toMatchObject({ schema_version: 7, dbt_version: '1.3.0', dbt_project: null });
    // Every model compiled: its SQL is dbt's, each "jaffle_shop"."dbt_jafsho".x now the dataset's name.
    for (const recipe of recipes) expect(recipe.params.query, recipe.name).not.toMatch(/dbt_jafsho|\{\{/);
    expect(recipes.find((r) => r.name === 'model.jaffle_shop.stg_payments')!.params.query).toMatch(/select \* from "raw_payments\w*"/);
  }, 120_000);

  it("reads a v8 manifest (dbt 1.4, BigQuery): `project`.`dataset`.relations rewritten, jaffle_shop's counts built", async () => {
    const { first, recipes } = await jaffleEndToEnd(fixture('jaffle_shop_v8_compiled/manifest.json'));
    expect(first).toMatchObject({ schema_version: 8, dbt_version: '1.4.1', dbt_project: null });
    for (const recipe of recipes) expect(recipe.params.query, recipe.name).not.toMatch(/dbt-dev-dan|`jaffle_shop`/);
    expect(recipes.find((r) => r.name === 'model.jaffle_shop.customers')!.params.query).toMatch(/select \* from "stg_customers\w*"/);
  }, 120_000);

  const people = seed('people', { config: { column_types: { id: 'integer', name: 'varchar(20)', age: 'int' } } });

  it('takes catalog.json as a file of the form too: a source gets its typed columns and descriptions', async () => {
    const project = await newProject();
    const source = { unique_id: 'source.tiny.crm.leads', resource_type: 'source', name: 'leads', source_name: 'crm', identifier: 'LEADS', package_name: 'tiny', description: 'Leads from the CRM', columns: { id: { name: 'id', description: 'The lead' } } };
    const catalog = { nodes: {}, sources: { 'source.tiny.crm.leads': { columns: { ID: { name: 'ID', type: 'BIGINT' }, SCORE: { name: 'SCORE', type: 'DOUBLE PRECISION' }, SEEN: { name: 'SEEN', type: 'timestamp with time zone' } } } } };
    // First without the catalog: the source's dataset has no columns yet; with it, the empty dataset takes them.
    const bare = await t.request('POST', '/api/dbt/imports', form({ project_id: String(project) }, { manifest: JSON.stringify(manifest([], 8, [source])) }));
    expect(bare.body.summary, bare.text).toMatchObject({ datasets_created: 1 });
    expect((await t.request('GET', `/api/datasets?project_id=${project}`)).body.items[0].columns).toEqual([]);
    const res = await t.request('POST', '/api/dbt/imports', form({ project_id: String(project) }, { manifest: JSON.stringify(manifest([], 8, [source])), catalog: JSON.stringify(catalog) }));
    expect(res.status, res.text).toBe(201);
    expect(res.body.summary).toMatchObject({ datasets_created: 0, datasets_updated: 1 });
    expect(res.body.schema_version).toBe(8);
    const leads = (await t.request('GET', `/api/datasets?project_id=${project}`)).body.items[0];
    expect(leads).toMatchObject({ name: 'leads', description: 'Leads from the CRM' });
    // Every column of the catalog, typed; upper-case names (a warehouse folding them so) lower-cased; the manifest's descriptions.
    expect(leads.columns).toEqual([
      { name: 'id', type: 'integer', pii: false, description: 'The lead' },
      { name: 'score', type: 'number', pii: false, description: null },
      { name: 'seen', type: 'timestamp', pii: false, description: null },
    ]);
    const truncated = await t.request('POST', '/api/dbt/imports', form({ project_id: String(project) }, { manifest: JSON.stringify(manifest([], 8, [source])), catalog: '{"nodes": {' }));
    expect(truncated.status, truncated.text).toBe(400);
    expect(truncated.body.errors[0].path).toBe('body.catalog');
  });

  it('imports again by unique_id: nothing duplicated, a changed model updates its recipe, a model gone is reported', async () => {
    const project = await newProject();
    const a = model('grown', "select id, name from {{ ref('people') }} where age >= 18", ['seed.tiny.people']);
    const b = model('grown_names', "select name from {{ ref('grown') }}", ['model.tiny.grown']);
    const first = await importJson({ project_id: project, manifest: manifest([people, a, b]) });
    expect(first.status, first.text).toBe(201);
    expect(first.body.summary).toEqual({ datasets_created: 3, datasets_updated: 0, recipes_created: 2, recipes_updated: 0, lineage_edges: 2, rules_created: 0, skipped: [], removed: [] });
    const again = await importJson({ project_id: project, manifest: manifest([people, a, b]) });
    expect(again.body.summary).toEqual({ datasets_created: 0, datasets_updated: 0, recipes_created: 0, recipes_updated: 0, lineage_edges: 2, rules_created: 0, skipped: [], removed: [] });
    expect((await t.request('GET', `/api/datasets?project_id=${project}`)).body.total).toBe(3);

    const changed = model('grown_names', "select upper(name) as name from {{ ref('grown') }}", ['model.tiny.grown'], { description: 'Names, shouted' });
    const third = await importJson({ project_id: project, manifest: manifest([people, a, changed]) });
    expect(third.body.summary).toMatchObject({ recipes_created: 0, recipes_updated: 1, datasets_updated: 1 });
    const recipes = (await t.request('GET', `/api/pipeline/recipes?project_id=${project}`)).body.items;
    expect(recipes).toHaveLength(2);
    expect(recipes.find((r: { name: string }) => r.name === 'model.tiny.grown_names').params.query).toContain('upper(name)');

    const fourth = await importJson({ project_id: project, manifest: manifest([people, a]) });
    expect(fourth.body.summary.removed.map((r: { unique_id: string; kind: string }) => `${r.kind}:${r.unique_id}`).sort()).toEqual(['dataset:model.tiny.grown_names', 'recipe:model.tiny.grown_names']);
    // Reported, left as they are.
    expect((await t.request('GET', `/api/pipeline/recipes?project_id=${project}`)).body.items).toHaveLength(2);
  });

  it('undoes what an import made when a fault stops it halfway (not a refusal): no dataset or recipe of it stays, a changed recipe is put back', async () => {
    const project = await newProject();
    const grown = model('grown', "select id, name from {{ ref('people') }}", ['seed.tiny.people']);
    expect((await importJson({ project_id: project, manifest: manifest([people, grown]) })).status).toBe(201);
    const before = { datasets: (await t.request('GET', `/api/datasets?project_id=${project}`)).body.items, recipes: (await t.request('GET', `/api/pipeline/recipes?project_id=${project}`)).body.items };
    const changed = model('grown', "select id, upper(name) as name from {{ ref('people') }}", ['seed.tiny.people']);
    const extra = model('extra', "select id from {{ ref('grown') }}", ['model.tiny.grown']);
    // A test on the seed, whose dataset was there before: its new rule must go too.
    const notNull = { unique_id: 'test.tiny.not_null_people_id', resource_type: 'test', name: 'not_null_people_id', package_name: 'tiny', column_name: 'id', attached_node: 'seed.tiny.people', test_metadata: { name: 'not_null', kwargs: { column_name: 'id' } } };
    // Other projects of this organization hold a dataset named people: this one's may be people_seed.
    const peopleId = before.datasets.find((d: { name: string }) => d.name.startsWith('people')).id;
    // The fault: the database refuses to record the import, after its datasets, recipes and rules were made.
    const { db } = t.kernel.storage;
    try {
      if (dialect === 'postgres') {
        await sql`create function dbt_test_fault() returns trigger language plpgsql as $$ begin raise exception 'injected fault'; end $$`.execute(db);
        await sql`create trigger dbt_test_fault before insert on dbt_imports for each row execute function dbt_test_fault()`.execute(db);
      } else {
        await sql`create trigger dbt_test_fault before insert on dbt_imports begin select raise(abort, 'injected fault'); end`.execute(db);
      }
      const failed = await importJson({ project_id: project, manifest: manifest([people, changed, extra, seed('more', { config: { column_types: { id: 'integer' } } }), notNull]) });
      expect(failed.status, failed.text).toBe(500);
    } finally {
      await sql`drop trigger if exists dbt_test_fault${dialect === 'postgres' ? sql` on dbt_imports` : sql``}`.execute(db);
      if (dialect === 'postgres') await sql`drop function if exists dbt_test_fault()`.execute(db);
    }
    expect((await t.request('GET', `/api/datasets?project_id=${project}`)).body.items.map((d: { id: number; name: string }) => [d.id, d.name])).toEqual(before.datasets.map((d: { id: number; name: string }) => [d.id, d.name]));
    const recipes = (await t.request('GET', `/api/pipeline/recipes?project_id=${project}`)).body.items;
    expect(recipes.map((r: { id: number; params: unknown }) => [r.id, r.params])).toEqual(before.recipes.map((r: { id: number; params: unknown }) => [r.id, r.params]));
    expect((await t.request('GET', `/api/dbt/imports?project_id=${project}`)).body.items).toHaveLength(1);
    expect((await t.request('GET', `/api/data-quality/rules?dataset_id=${peopleId}`)).body).toEqual([]);
    // The project's record of what it made is intact: the same import, fault gone, changes and adds once.
    const retried = await importJson({ project_id: project, manifest: manifest([people, changed, extra, seed('more', { config: { column_types: { id: 'integer' } } })]) });
    expect(retried.body.summary).toMatchObject({ datasets_created: 2, recipes_created: 1, recipes_updated: 1, skipped: [] });
  });

  it('runs one import of a project at a time: two at once duplicate nothing', async () => {
    const project = await newProject();
    const body = { project_id: project, manifest: manifest([people, model('grown', "select id from {{ ref('people') }}", ['seed.tiny.people'])]) };
    const answers = await Promise.all([importJson(body), importJson(body)]);
    const statuses = answers.map((a) => a.status).sort();
    expect([[201, 201], [201, 409]], JSON.stringify(answers.map((a) => a.body))).toContainEqual(statuses);
    if (statuses[1] === 409) expect(answers.find((a) => a.status === 409)!.body.detail).toMatch(/another dbt import of project/);
    expect((await t.request('GET', `/api/datasets?project_id=${project}`)).body.total).toBe(2);
    expect((await t.request('GET', `/api/pipeline/recipes?project_id=${project}`)).body.items).toHaveLength(1);
  });

  it('gives colliding resources distinct names the same way every time, and adopts a seed whose data is already in the project', async () => {
    const project = await newProject();
    const existing = await t.request('POST', '/api/datasets', { body: { name: 'pets', project_id: project, columns: [{ name: 'id', type: 'integer' }] } });
    expect(existing.status, existing.text).toBe(201);
    const source = { unique_id: 'source.tiny.shop.things', resource_type: 'source', name: 'things', source_name: 'shop', identifier: 'things', package_name: 'tiny', columns: {} };
    const thingsSeed = seed('things', { config: { column_types: { id: 'integer' } } });
    const thingsModel = model('things', "select id from {{ ref('pets') }}", ['seed.tiny.pets']);
    const res = await importJson({ project_id: project, manifest: manifest([thingsModel, seed('pets'), thingsSeed], 10, [source]) });
    expect(res.status, res.text).toBe(201);
    expect(res.body.summary).toMatchObject({ datasets_created: 3, datasets_updated: 1, recipes_created: 1 });
    const names = (await t.request('GET', `/api/datasets?project_id=${project}`)).body.items.map((d: { id: number; name: string }) => `${d.id === existing.body.id ? 'adopted ' : ''}${d.name}`).sort();
    expect(names).toEqual(['adopted pets', 'things', 'things_seed', 'things_shop']);
  });

  it('skips, with the reason, what it cannot import: hostile SQL, unknown macros, template escapes, runaway templates, Python models, singular tests', async () => {
    const project = await newProject();
    const other = await t.outsider(`dbt-${dialect}-${Date.now()}`);
    const otherProject = await t.request('POST', '/api/projects', { token: other.token, body: { key: 'OTH', name: 'other' } });
    const secret = await t.request('POST', '/api/datasets', { token: other.token, body: { name: 'other_secret', project_id: otherProject.body.id, columns: [{ name: 'v', type: 'string' }] } });
    expect(secret.status, secret.text).toBe(201);
    const on = ['seed.tiny.people'];
    const hostile = {
      ok: "select id, name from {{ ref('people') }} -- {{ ref('people') }}; drop table x",
      quotes: "select 'it''s' as quip, \"name\" from {{ ref('people') }} where name <> 'x'' or 1=1 --'",
      two_statements: "select * from {{ ref('people') }}; drop table people",
      open_comment: "select * from {{ ref('people') }} /* and then",
      other_org: 'select * from other_secret',
      physical: `select * from org_${other.orgId}__ds_${secret.body.id}`,
      unknown_macro: "select {{ dbt_utils.star(ref('people')) }} from {{ ref('people') }}",
      undefined_macro: "select {{ cents_to_dollars('age') }} from {{ ref('people') }}",
      escape: "select {{ ref.constructor('return process.pid')() }} as pid from {{ ref('people') }}",
      computed: "{% set k = 'constr' ~ 'uctor' %}select {{ ref[k] }} from {{ ref('people') }}",
      huge_range: "select 1 as x from {{ ref('people') }}{% for i in range(100000000) %} {% endfor %}",
      runaway: "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}select 1 as x from {{ ref('people') }}",
      unknown_var: "select {{ var('cutoff') }} as c from {{ ref('people') }}",
      itself: 'select * from {{ this }}',
      huge: `select 1 as x from {{ ref('people') }} -- ${'x'.repeat(200_000)}`,
    };
    const models = [
      ...Object.entries(hostile).map(([name, raw]) => model(name, raw, on)),
      // Two models reading each other.
      model('ping', "select * from {{ ref('pong') }}", ['model.tiny.pong']),
      model('pong', "select * from {{ ref('ping') }}", ['model.tiny.ping']),
    ];
    const python = model('py', 'def model(dbt, session): return dbt.ref("people")', on, { language: 'python' });
    const singular = { unique_id: 'test.tiny.assert_adults', resource_type: 'test', name: 'assert_adults', package_name: 'tiny', depends_on: { nodes: ['model.tiny.ok'] }, attached_node: null };
    const generic = (name: string, kwargs: Record<string, unknown>, column: string | null) => ({
      unique_id: `test.tiny.${name}`,
      resource_type: 'test',
      name,
      package_name: 'tiny',
      column_name: column,
      attached_node: 'seed.tiny.people',
      depends_on: { nodes: ['seed.tiny.people'] },
      test_metadata: { name: name.split('__')[0], namespace: name.includes('expression') ? 'dbt_utils' : null, kwargs },
    });
    const tests = [
      singular,
      generic('not_null__id', { column_name: 'id' }, 'id'),
      generic('unique__id', { column_name: 'id' }, 'id'),
      generic('accepted_values__name', { column_name: 'name', values: ['Ada', 'Bob'] }, 'name'),
      generic('expression_is_true__age', { expression: 'age > 0' }, null),
      generic('not_null__missing', { column_name: 'missing' }, 'missing'),
    ];
    const snapshot = { unique_id: 'snapshot.tiny.people_history', resource_type: 'snapshot', name: 'people_history', package_name: 'tiny', alias: 'people_history', raw_code: '{% snapshot people_history %}select * from {{ ref("people") }}{% endsnapshot %}', columns: {} };
    const unitTests = { 'unit_test.tiny.ok.adults_only': { name: 'adults_only', model: 'ok' } };
    const res = await importJson({ project_id: project, manifest: { ...manifest([people, ...models, python, snapshot, ...tests]), unit_tests: unitTests } });
    expect(res.status, res.text).toBe(201);
    const reasons: Record<string, string> = Object.fromEntries(res.body.summary.skipped.map((s: { unique_id: string; reason: string }) => [s.unique_id.split('.').at(-1), s.reason]));
    // A comment left open ends the statement on SQLite (whose wrapper closes it) and is a syntax error on Postgres.
    const openComment = dialect === 'sqlite' ? [] : ['open_comment'];
    expect(Object.keys(reasons).sort()).toEqual(
      [...openComment, 'two_statements', 'other_org', 'physical', 'unknown_macro', 'undefined_macro', 'escape', 'computed', 'huge_range', 'runaway', 'unknown_var', 'itself', 'huge', 'ping', 'pong', 'py', 'people_history', 'adults_only', 'assert_adults', 'expression_is_true__age', 'not_null__missing'].sort(),
    );
    expect(res.body.summary).toMatchObject({ recipes_created: 3 - openComment.length, rules_created: 3 });
    expect(reasons.escape).toMatch(/attribute "constructor" is not rendered/);
    expect(reasons.computed).toMatch(/computed attribute/);
    expect(reasons.unknown_macro).toMatch(/attribute "star"/);
    expect(reasons.undefined_macro).toMatch(/cents_to_dollars/);
    expect(reasons.huge_range).toMatch(/range\(\) of more than/);
    expect(reasons.runaway).toMatch(/longer than 5 s|too much memory/);
    expect(reasons.unknown_var).toMatch(/var\('cutoff'\)/);
    expect(reasons.itself).toMatch(/not an input of the recipe|refused/);
    expect(reasons.huge).toMatch(/longer than 100000 characters/);
    expect([reasons.ping, reasons.pong].sort().join(' | ')).toMatch(/depends on model\.tiny\.p[io]ng, which (was skipped|is not imported)/);
    expect(reasons.people_history).toMatch(/snapshot becomes a dataset without a recipe/);
    expect(reasons.adults_only).toMatch(/unit test is not imported/);
    expect(reasons.py).toMatch(/python model is not imported/);
    expect(reasons.assert_adults).toMatch(/singular test/);
    expect(reasons.expression_is_true__age).toMatch(/dbt_utils\.expression_is_true test has no matching rule type/);
    expect(reasons.other_org).toMatch(/other_secret/);
    for (const name of ['two_statements', ...openComment, 'other_org', 'physical']) expect(reasons[name], name).toMatch(/refused|not an input|no such table|does not exist|syntax/i);
    const recipes = (await t.request('GET', `/api/pipeline/recipes?project_id=${project}`)).body.items.map((r: { name: string }) => r.name).sort();
    expect(recipes).toEqual(dialect === 'sqlite' ? ['model.tiny.ok', 'model.tiny.open_comment', 'model.tiny.quotes'] : ['model.tiny.ok', 'model.tiny.quotes']);
  }, 60_000);

  it('refuses a body that is not JSON, too large, of an unknown schema version or holding NUL, a lone surrogate or nesting past 100 levels, naming the problem, and imports nothing', async () => {
    const project = await newProject();
    const before = (await t.request('GET', '/api/datasets?limit=1')).body.total;
    const tiny = manifest([people]);
    const cases: [string, Parameters<TestKernel['request']>[2], number, RegExp][] = [
      ['truncated JSON', { body: JSON.stringify({ project_id: project, manifest: tiny }).slice(0, 80), headers: { 'content-type': 'application/json' } }, 400, /^body$/],
      ['truncated file', form({ project_id: String(project) }, { manifest: JSON.stringify(tiny).slice(0, 50) }), 400, /^body\.manifest$/],
      ['no manifest file', form({ project_id: String(project) }, {}), 400, /^body\.manifest$/],
      ['project id as text', { body: { project_id: String(project), manifest: tiny } }, 400, /^body\.project_id$/],
      ['manifest as a list', { body: { project_id: project, manifest: [tiny] } }, 400, /^body\.manifest$/],
      ['unknown version', { body: { project_id: project, manifest: { ...tiny, metadata: { dbt_schema_version: 'https://schemas.getdbt.com/dbt/manifest/v99.json' } } } }, 422, /^body\.manifest\.metadata\.dbt_schema_version$/],
      ['too old a version', { body: { project_id: project, manifest: { ...tiny, metadata: { dbt_schema_version: 'https://schemas.getdbt.com/dbt/manifest/v6.json' } } } }, 422, /^body\.manifest\.metadata\.dbt_schema_version$/],
      ['no version', { body: { project_id: project, manifest: { nodes: {} } } }, 400, /^body\.manifest\.metadata/],
      ['nodes of a wrong type', { body: { project_id: project, manifest: { ...tiny, nodes: { 'seed.tiny.x': { unique_id: 7, resource_type: 'seed', name: 'x' } } } } }, 400, /^body\.manifest\.nodes\.seed\.tiny\.x\.unique_id$/],
      ['NUL in a description', { body: { project_id: project, manifest: manifest([seed('nul', { description: 'a\u0000b' })]) } }, 400, /^body\.manifest\.nodes\.seed\.tiny\.nul\.description$/],
      ['NUL in a file', form({ project_id: String(project) }, { manifest: JSON.stringify(manifest([model('m', 'select 1 -- \u0000', [])])) }), 400, /^body\.manifest\.nodes\.model\.tiny\.m\.raw_code$/],
      ['a lone surrogate in a description', { body: { project_id: project, manifest: manifest([seed('lone', { description: 'a\ud800b' })]) } }, 400, /^body\.manifest\.nodes\.seed\.tiny\.lone\.description$/],
      ['a file nested past 100 levels', form({ project_id: String(project) }, { manifest: JSON.stringify({ ...tiny, deep: JSON.parse(`${'['.repeat(120)}1${']'.repeat(120)}`) }) }), 400, /^body\.manifest\.deep(\.0)+$/],
      ['a unique_id that is not its key', { body: { project_id: project, manifest: { ...tiny, nodes: { 'seed.tiny.a': seed('b') } } } }, 400, /^body\.manifest\.nodes\.seed\.tiny\.a\.unique_id$/],
      ['a node that is also a source', { body: { project_id: project, manifest: manifest([seed('a')], 12, [seed('a')]) } }, 400, /^body\.manifest\.sources\.seed\.tiny\.a$/],
      ['a catalog of a wrong shape', { body: { project_id: project, manifest: tiny, catalog: { nodes: { x: { columns: 'id' } } } } }, 400, /^body\.catalog\.nodes\.x\.columns$/],
      ['a project of nobody', { body: { project_id: 999_999, manifest: tiny } }, 422, /^body\.project_id$/],
    ];
    for (const [name, request, status, path] of cases) {
      const res = await t.request('POST', '/api/dbt/imports', request);
      expect(res.status, `${name}: ${res.text}`).toBe(status);
      expect(res.body.errors?.[0]?.path, `${name}: ${res.text}`).toMatch(path);
    }
    const huge = JSON.stringify({ project_id: project, manifest: { ...tiny, padding: 'x'.repeat(3 * 1024 * 1024) } });
    const tooLarge = await t.request('POST', '/api/dbt/imports', { body: huge, headers: { 'content-type': 'application/json' } });
    expect(tooLarge.status, tooLarge.text).toBe(413);
    expect(tooLarge.body.detail).toMatch(/DBT_MANIFEST_LIMIT/);
    const hugeForm = await t.request('POST', '/api/dbt/imports', form({ project_id: String(project) }, { manifest: huge }));
    expect(hugeForm.status, hugeForm.text).toBe(413);
    expect((await t.request('GET', '/api/datasets?limit=1')).body.total).toBe(before);
    expect((await t.request('GET', `/api/dbt/imports?project_id=${project}`)).body.items).toEqual([]);
  });

  it('asks for the capabilities of what it creates, and keeps imports within their organization', async () => {
    const viewer = await t.userToken('viewer', `dbt-viewer-${dialect}`);
    const denied = await importJson({ project_id: projectId, manifest: manifest([people]) }, viewer.token);
    expect(denied.status, denied.text).toBe(403);
    const mine = (await t.request('GET', `/api/dbt/imports?project_id=${projectId}`)).body.items[0];
    const other = await t.outsider(`dbt-other-${dialect}`);
    expect((await t.request('GET', `/api/dbt/imports/${mine.id}`, { token: other.token })).status).toBe(404);
    expect((await t.request('GET', '/api/dbt/imports', { token: other.token })).body.items).toEqual([]);
    const intoMine = await importJson({ project_id: projectId, manifest: manifest([seed('intruder')]) }, other.token);
    expect(intoMine.status, intoMine.text).toBe(422);
    expect(await datasetByName('intruder')).toBeUndefined();
  });

  it('lists imports a page at a time, newest first, each once; a bad limit or cursor is a 400 naming it', async () => {
    const project = await newProject();
    const made: number[] = [];
    for (let i = 0; i < 7; i++) made.unshift((await importJson({ project_id: project, manifest: manifest([]) })).body.id);
    const page = async (query: string) => {
      const res = await t.request('GET', `/api/dbt/imports?project_id=${project}&${query}`);
      expect(res.status, res.text).toBe(200);
      return res.body as { items: { id: number }[]; next_cursor: string | null };
    };
    const seen: number[][] = [];
    let cursor: string | null = null;
    do {
      const next: Awaited<ReturnType<typeof page>> = await page(`limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      seen.push(next.items.map((i) => i.id));
      cursor = next.next_cursor;
      // An import made while the pages are read comes first, on no page already read or still to read.
      if (seen.length === 1) await importJson({ project_id: project, manifest: manifest([]) });
    } while (cursor);
    expect(seen).toEqual([made.slice(0, 3), made.slice(3, 6), made.slice(6)]);
    // The default page (50) holds them all, the newest first, and says there is no next.
    const all = await page('');
    expect([all.items.length, all.items[1].id, all.next_cursor]).toEqual([8, made[0], null]);

    const forged = Buffer.from(JSON.stringify({ before: 'x' })).toString('base64url');
    for (const [query, path] of [['limit=0', 'query.limit'], ['limit=501', 'query.limit'], ['limit=two', 'query.limit'], ['cursor=not-ours', 'query.cursor'], [`cursor=${forged}`, 'query.cursor']]) {
      const res = await t.request('GET', `/api/dbt/imports?project_id=${project}&${query}`);
      expect(res.status, `${query}: ${res.text}`).toBe(400);
      expect(res.body.errors.map((e: { path: string }) => e.path), query).toContain(path);
    }
  });
});
