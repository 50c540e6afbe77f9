import { readFileSync } from 'node:fs';
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
    // jaffle_shop's own counts: 100 customers, 99 orders.
    expect((await t.request('GET', `/api/datasets/${customers.id}`)).body.row_count).toBe(100);
    expect((await t.request('GET', `/api/datasets/${orders.id}`)).body.row_count).toBe(99);

    // Built, the models have columns: a third import adds their descriptions and the tests as rules, and duplicates nothing.
    const third = await t.request('POST', '/api/dbt/imports', body);
    expect(third.status, third.text).toBe(201);
    expect(third.body.summary, JSON.stringify(third.body.summary.skipped)).toMatchObject({ datasets_created: 0, recipes_created: 0, recipes_updated: 0, lineage_edges: 8 });
    expect(third.body.summary.rules_created).toBeGreaterThanOrEqual(15);
    const described = (await t.request('GET', `/api/datasets/${customers.id}`)).body;
    expect(described.description).toMatch(/basic information about a customer/);
    expect(described.columns.find((c: { name: string }) => c.name === 'customer_id').description).toBe('This is a unique identifier for a customer');
    const recipes = (await t.request('GET', `/api/pipeline/recipes?project_id=${projectId}`)).body.items;
    expect(recipes).toHaveLength(5);
    const rules = (await t.request('GET', `/api/data-quality/rules?dataset_id=${orders.id}`)).body;
    expect(rules.map((r: { type: string }) => r.type)).toContain('allowed_values');

    const listed = await t.request('GET', `/api/dbt/imports?project_id=${projectId}`);
    expect(listed.body.items.map((i: { id: number }) => i.id)).toEqual([third.body.id, second.body.id, first.body.id]);
    expect((await t.request('GET', `/api/dbt/imports/${first.body.id}`)).body.summary.datasets_created).toBe(8);
  }, 120_000);
});
