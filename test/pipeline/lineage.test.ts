import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, type TestKernel } from '../harness/index.ts';

/**
 * A third-party plugin as its author would write it, outside the repository: it reports a
 * dashboard reading `total` and a job reading `amount` of whichever datasets it is asked about
 * (lineage.consumers), and contributes a handler recipe type (`watch_copy`), whose column origins
 * the pipeline cannot know.
 */
function writeWatcherPlugin(root: string) {
  const file = (name: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), text);
  };
  file(
    'watcher/index.ts',
    `import { definePlugin } from 'data-platform/plugin-api';
import { lineageConsumers } from 'data-platform/plugins/lineage';

export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(lineageConsumers, async (_orgId, datasets) =>
      datasets.flatMap((d) => [
        ...(d.columns.includes('total') ? [{ kind: 'dashboard', id: 'revenue', name: 'Revenue board', dataset_id: d.dataset_id, columns: ['total'] }] : []),
        ...(d.columns.includes('amount') ? [{ kind: 'job', id: 7, name: 'Nightly build', dataset_id: d.dataset_id, columns: ['amount'] }] : []),
      ]),
    ),
});
`,
  );
  file('watcher/handlers.ts', `export async function copy() {}\n`);
  file(
    'manifests/watcher.json',
    JSON.stringify({
      id: 'watcher',
      version: '1.0.0',
      kind: 'extension',
      entry: '../watcher/index.ts',
      depends_on: ['lineage', 'pipeline'],
      contributes: { 'pipeline.recipe-types': [{ id: 'watch_copy', handler: 'handlers:copy', params: { type: 'object' } }] },
    }),
  );
}

type Node = { id: string; kind: string; ref_id: number; name: string | null; type: string | null; depth: number };
type Step = { dataset_id: number; dataset: string; column: string; recipe_id: number; transformation: string; direction: string; depth: number };

describe.each(DIALECTS)('lineage (%s)', (dialect) => {
  let t: TestKernel;
  const folder = tempDir('dp-lineage-');
  const ds: Record<string, number> = {};
  const recipe: Record<string, number> = {};

  const dataset = async (projectId: number, name: string, columns: [string, string][]) => {
    const res = await t.request('POST', '/api/datasets', { body: { name, project_id: projectId, columns: columns.map(([n, type]) => ({ name: n, type })) } });
    expect(res.status, res.text).toBe(201);
    ds[name] = res.body.id;
  };
  const recipeOf = async (projectId: number, name: string, type: string, inputs: string[], outputs: string[], params: Record<string, unknown>) => {
    const res = await t.request('POST', '/api/pipeline/recipes', { body: { project_id: projectId, name, type, inputs: inputs.map((d) => ds[d]), outputs: outputs.map((d) => ds[d]), params } });
    expect(res.status, res.text).toBe(201);
    recipe[name] = res.body.id;
  };
  const get = async <T>(url: string) => {
    const res = await t.request<T>('GET', url);
    expect(res.status, res.text).toBe(200);
    return res.body;
  };
  /** Nodes as `dataset:name@depth` / `recipe:name@depth`, sorted. */
  const nodesOf = (graph: { nodes: Node[] }) => graph.nodes.map((n) => `${n.kind}:${n.name}@${n.depth}`).sort();
  /** Steps as `dataset.column transformation depth`, sorted. */
  const stepsOf = (body: { items: Step[] }) => body.items.map((s) => `${s.dataset}.${s.column} ${s.transformation} ${s.depth}`).sort();

  beforeAll(async () => {
    writeWatcherPlugin(folder.dir);
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), path.join(folder.dir, 'manifests')] });
    const project = (await t.request('POST', '/api/projects', { body: { key: 'LINEAGE', name: 'Lineage' } })).body.id;
    await dataset(project, 'orders', [['id', 'integer'], ['customer_id', 'integer'], ['amount', 'number'], ['day', 'date']]);
    await dataset(project, 'customers', [['id', 'integer'], ['name', 'string']]);
    // Outputs declared with the columns their recipes write, so each next recipe plans without a run.
    await dataset(project, 'orders_clean', [['id', 'integer'], ['cust', 'integer'], ['amount', 'integer']]);
    await dataset(project, 'joined', [['order_id', 'integer'], ['amount', 'integer'], ['name', 'string']]);
    await dataset(project, 'per_customer', [['name', 'string'], ['total', 'integer']]);
    await dataset(project, 'big_spenders', []);
    await dataset(project, 'copied', [['total_copy', 'integer']]);

    // orders ─clean→ orders_clean ─join(customers)→ joined ─by_customer→ per_customer ─copy→ copied
    // orders, customers ─spenders (sql)→ big_spenders
    await recipeOf(project, 'clean', 'select', ['orders'], ['orders_clean'], { columns: [{ name: 'id' }, { name: 'customer_id', as: 'cust' }, { name: 'amount', type: 'integer' }] });
    await recipeOf(project, 'join_customers', 'join', ['orders_clean', 'customers'], ['joined'], {
      on: [{ left: 'cust', right: 'id' }],
      columns: [{ input: 'left', name: 'id', as: 'order_id' }, { input: 'left', name: 'amount' }, { input: 'right', name: 'name' }],
    });
    await recipeOf(project, 'by_customer', 'group', ['joined'], ['per_customer'], { keys: ['name'], aggregations: [{ column: 'amount', fn: 'sum', as: 'total' }] });
    await recipeOf(project, 'copy', 'watch_copy', ['per_customer'], ['copied'], {});
    await recipeOf(project, 'spenders', 'sql', ['orders', 'customers'], ['big_spenders'], {
      query: `with big as (select customer_id, amount from orders where amount > 10)
              select c.name as customer, b.amount * 2 as doubled, cast(b.customer_id as text) as cid from big b join customers c on c.id = b.customer_id`,
    });
  });
  afterAll(async () => {
    await t?.stop();
    folder.remove();
  });

  describe('dataset lineage', () => {
    it('walks upstream, downstream and both ways through recipes, each node at its signed depth', async () => {
      const up = await get<{ nodes: Node[]; edges: unknown[] }>(`/api/lineage/datasets/${ds.per_customer}?direction=upstream`);
      expect(nodesOf(up)).toEqual(
        ['dataset:per_customer@0', 'recipe:by_customer@-1', 'dataset:joined@-1', 'recipe:join_customers@-2', 'dataset:orders_clean@-2', 'dataset:customers@-2', 'recipe:clean@-3', 'dataset:orders@-3'].sort(),
      );
      expect(up.nodes.find((n) => n.kind === 'recipe' && n.ref_id === recipe.by_customer)).toEqual({ id: `recipe:${recipe.by_customer}`, kind: 'recipe', ref_id: recipe.by_customer, name: 'by_customer', type: 'group', depth: -1 });
      expect(up.nodes.find((n) => n.depth === 0)).toMatchObject({ id: `dataset:${ds.per_customer}`, type: null });
      expect(up.edges).toEqual(
        expect.arrayContaining([
          { from: `dataset:${ds.joined}`, to: `recipe:${recipe.by_customer}` },
          { from: `recipe:${recipe.by_customer}`, to: `dataset:${ds.per_customer}` },
          { from: `dataset:${ds.customers}`, to: `recipe:${recipe.join_customers}` },
        ]),
      );
      expect(up.edges).toHaveLength(7);

      const down = await get<{ nodes: Node[] }>(`/api/lineage/datasets/${ds.orders}?direction=downstream`);
      expect(nodesOf(down)).toEqual(
        [
          'dataset:orders@0',
          'recipe:clean@1',
          'dataset:orders_clean@1',
          'recipe:spenders@1',
          'dataset:big_spenders@1',
          'recipe:join_customers@2',
          'dataset:joined@2',
          'recipe:by_customer@3',
          'dataset:per_customer@3',
          'recipe:copy@4',
          'dataset:copied@4',
        ].sort(),
      );

      const both = await get<{ nodes: Node[]; edges: unknown[] }>(`/api/lineage/datasets/${ds.joined}?depth=1`);
      expect(nodesOf(both)).toEqual(['dataset:joined@0', 'recipe:join_customers@-1', 'dataset:orders_clean@-1', 'dataset:customers@-1', 'recipe:by_customer@1', 'dataset:per_customer@1'].sort());
      expect(both.edges).toHaveLength(5);
    });

    it('stops at the depth asked (0: the dataset alone)', async () => {
      const two = await get<{ nodes: Node[] }>(`/api/lineage/datasets/${ds.orders}?direction=downstream&depth=2`);
      expect(Math.max(...two.nodes.map((n) => n.depth))).toBe(2);
      expect(nodesOf(two)).not.toContain('dataset:per_customer@3');
      const none = await get<{ nodes: Node[]; edges: unknown[] }>(`/api/lineage/datasets/${ds.orders}?depth=0`);
      expect(none).toEqual({ nodes: [{ id: `dataset:${ds.orders}`, kind: 'dataset', ref_id: ds.orders, name: 'orders', type: null, depth: 0 }], edges: [] });
    });
  });

  describe('column lineage', () => {
    it('follows a column upstream through group (aggregated), join and select (cast)', async () => {
      const body = await get<{ items: Step[] }>(`/api/lineage/datasets/${ds.per_customer}/columns/total?direction=upstream`);
      expect(stepsOf(body)).toEqual(['joined.amount aggregated -1', 'orders_clean.amount identity -2', 'orders.amount cast -3'].sort());
      expect(body.items[0]).toEqual({ dataset_id: ds.joined, dataset: 'joined', column: 'amount', recipe_id: recipe.by_customer, transformation: 'aggregated', direction: 'upstream', depth: -1 });
    });

    it('follows a column downstream through select (renamed, cast), join, group, sql and a handler type (derived: origins unknown)', async () => {
      const amount = await get<{ items: Step[] }>(`/api/lineage/datasets/${ds.orders}/columns/amount?direction=downstream`);
      expect(stepsOf(amount)).toEqual(
        ['orders_clean.amount cast 1', 'big_spenders.doubled derived 1', 'joined.amount identity 2', 'per_customer.total aggregated 3', 'copied.total_copy derived 4'].sort(),
      );
      const customer = await get<{ items: Step[] }>(`/api/lineage/datasets/${ds.orders}/columns/customer_id?direction=downstream`);
      expect(stepsOf(customer)).toEqual(['orders_clean.cust renamed 1', 'big_spenders.cid cast 1'].sort());
      const name = await get<{ items: Step[] }>(`/api/lineage/datasets/${ds.customers}/columns/name?direction=downstream`);
      expect(stepsOf(name)).toEqual(['joined.name identity 1', 'big_spenders.customer renamed 1', 'per_customer.name identity 2', 'copied.total_copy derived 3'].sort());
    });

    it('treats a recipe of unknown origins as deriving every output column from every input column, and goes both ways by default', async () => {
      const body = await get<{ items: Step[] }>(`/api/lineage/datasets/${ds.copied}/columns/total_copy`);
      expect(stepsOf(body)).toEqual(
        [
          'per_customer.name derived -1',
          'per_customer.total derived -1',
          'joined.name identity -2',
          'joined.amount aggregated -2',
          'customers.name identity -3',
          'orders_clean.amount identity -3',
          'orders.amount cast -4',
        ].sort(),
      );
      const both = await get<{ items: Step[] }>(`/api/lineage/datasets/${ds.joined}/columns/amount`);
      expect(both.items.map((s) => s.direction)).toEqual(expect.arrayContaining(['upstream', 'downstream']));
    });

    it('reads a column an unbuilt output will have from its recipe\u2019s plan', async () => {
      const body = await get<{ items: Step[] }>(`/api/lineage/datasets/${ds.big_spenders}/columns/doubled?direction=upstream`);
      expect(stepsOf(body)).toEqual(['orders.amount derived -1']);
    });
  });

  describe('impact', () => {
    it('lists the downstream datasets and columns, the recipes on the way, and contributed consumers and jobs', async () => {
      const body = await get<Record<string, any>>(`/api/lineage/datasets/${ds.orders}/impact?columns=amount`);
      expect(body.dataset_id).toBe(ds.orders);
      expect(body.columns).toEqual(['amount']);
      expect(body.datasets).toEqual(
        expect.arrayContaining([
          { dataset_id: ds.orders_clean, dataset: 'orders_clean', columns: ['amount'] },
          { dataset_id: ds.big_spenders, dataset: 'big_spenders', columns: ['doubled'] },
          { dataset_id: ds.joined, dataset: 'joined', columns: ['amount'] },
          { dataset_id: ds.per_customer, dataset: 'per_customer', columns: ['total'] },
          { dataset_id: ds.copied, dataset: 'copied', columns: ['total_copy'] },
        ]),
      );
      expect(body.datasets).toHaveLength(5);
      expect(body.recipes.map((r: { name: string }) => r.name).sort()).toEqual(['by_customer', 'clean', 'copy', 'join_customers', 'spenders']);
      expect(body.recipes.find((r: { name: string }) => r.name === 'copy')).toEqual({ id: recipe.copy, name: 'copy', type: 'watch_copy' });
      const dashboard = { kind: 'dashboard', id: 'revenue', name: 'Revenue board', plugin_id: 'watcher', dataset_id: ds.per_customer, columns: ['total'] };
      const jobs = [ds.orders, ds.orders_clean, ds.joined].map((id) => ({ kind: 'job', id: 7, name: 'Nightly build', plugin_id: 'watcher', dataset_id: id, columns: ['amount'] }));
      expect(body.consumers).toHaveLength(4);
      expect(body.consumers).toEqual(expect.arrayContaining([dashboard, ...jobs]));
      expect(body.jobs).toHaveLength(3);
      expect(body.jobs).toEqual(expect.arrayContaining(jobs));
    });

    it('takes every column when none is named; a column nothing reads touches nothing', async () => {
      const all = await get<Record<string, any>>(`/api/lineage/datasets/${ds.customers}/impact`);
      expect(all.columns).toEqual(['id', 'name']);
      expect(all.datasets.map((d: { dataset: string }) => d.dataset).sort()).toEqual(['big_spenders', 'copied', 'joined', 'per_customer']);
      const day = await get<Record<string, any>>(`/api/lineage/datasets/${ds.orders}/impact?columns=day`);
      expect(day).toEqual({ dataset_id: ds.orders, columns: ['day'], datasets: [], recipes: [], jobs: [], consumers: [] });
    });
  });

  describe('refusals', () => {
    const expectProblem = async (url: string, status: number, field?: string) => {
      const res = await t.request('GET', url);
      expect(res.status, res.text).toBe(status);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      if (field) expect(res.body.errors.map((e: { path: string }) => e.path).join(' '), res.text).toContain(field);
      return res.body;
    };

    it('answers 400 naming the query field for a bad direction or depth', async () => {
      await expectProblem(`/api/lineage/datasets/${ds.orders}?direction=sideways`, 400, 'query.direction');
      await expectProblem(`/api/lineage/datasets/${ds.orders}/columns/amount?direction=sideways`, 400, 'query.direction');
      for (const depth of ['-1', 'abc', '101', '1.5']) await expectProblem(`/api/lineage/datasets/${ds.orders}?depth=${depth}`, 400, 'query.depth');
    });

    it('answers 404 naming an unknown column, 400 for one in the impact list, a list too long or a control character', async () => {
      const missing = await expectProblem(`/api/lineage/datasets/${ds.orders}/columns/nope`, 404);
      expect(missing.detail).toContain('"nope"');
      const unknown = await expectProblem(`/api/lineage/datasets/${ds.orders}/impact?columns=amount,nope`, 400, 'query.columns');
      expect(unknown.detail).toContain('"nope"');
      const huge = Array.from({ length: 1001 }, (_, i) => `c${i}`).join(',');
      await expectProblem(`/api/lineage/datasets/${ds.orders}/impact?columns=${huge}`, 400, 'query.columns');
      await expectProblem(`/api/lineage/datasets/${ds.orders}/impact?columns=amount,a%00b`, 400, 'query.columns');
      await expectProblem(`/api/lineage/datasets/${ds.orders}/columns/a%00b`, 400, 'column');
    });

    it('answers 404 for a dataset of another organization on every route', async () => {
      const outsider = await t.outsider('lineage-outsider');
      for (const url of [`/api/lineage/datasets/${ds.orders}`, `/api/lineage/datasets/${ds.orders}/columns/amount`, `/api/lineage/datasets/${ds.orders}/impact`]) {
        const res = await t.request('GET', url, { token: outsider.token });
        expect(res.status, res.text).toBe(404);
        expect(res.text).not.toContain('orders_clean');
      }
    });
  });
});
