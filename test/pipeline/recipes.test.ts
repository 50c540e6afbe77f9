import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { createRecipe, emptyDataset, loadDataset, rowsOf, runRecipe } from './pipeline-helpers.ts';

describe.each(DIALECTS)('recipes pushed down to the database (%s)', (dialect) => {
  let t: TestKernel;
  let project: number;
  let orders: number;
  let customers: number;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    project = (await t.request('POST', '/api/projects', { body: { key: 'SHOP', name: 'Shop' } })).body.id;
    orders = await loadDataset(t, project, 'orders', ['id:integer', 'customer:integer', 'amount:number', 'city:string', 'day:date'], [
      '1,10,20.5,Paris,2026-01-01',
      '2,10,5,Paris,2026-01-02',
      '3,11,100,Lyon,2026-01-02',
      '4,12,7.25,Nice,2026-01-03',
      '5,,1,Lyon,2026-01-04',
    ]);
    customers = await loadDataset(t, project, 'customers', ['customer:integer', 'name:string'], ['10,Ada', '11,Bob', '13,Cy']);
  });
  afterAll(async () => t?.stop());

  it('filters, groups and joins, each as one statement in the database, and the outputs take the columns of the result', async () => {
    const big = await emptyDataset(t, project, 'big_orders');
    const filter = await createRecipe(t, { project_id: project, name: 'big', type: 'filter', inputs: [orders], outputs: [big], params: { conditions: ['amount:gte:7', 'city:ne:Nice'], combine: 'and' } });
    const run = await runRecipe(t, filter);
    expect(run, JSON.stringify(run)).toMatchObject({ status: 'succeeded', kind: 'recipe', trigger: 'manual', rows_written: 2, error: null });
    expect((await rowsOf(t, big)).map((r) => r.id)).toEqual([1, 3]);

    const perCity = await emptyDataset(t, project, 'per_city');
    const group = await createRecipe(t, {
      project_id: project,
      name: 'per city',
      type: 'group',
      inputs: [orders],
      outputs: [perCity],
      params: { keys: ['city'], aggregations: [{ fn: 'count', as: 'orders' }, { column: 'amount', fn: 'sum', as: 'total' }, { column: 'customer', fn: 'count_distinct', as: 'customers' }] },
    });
    expect((await runRecipe(t, group)).status).toBe('succeeded');
    const dataset = (await t.request('GET', `/api/datasets/${perCity}`)).body;
    expect(dataset.columns.map((c: { name: string; type: string }) => `${c.name}:${c.type}`)).toEqual(['city:string', 'orders:integer', 'total:number', 'customers:integer']);
    expect(dataset.version).toBe(2);
    const rows = (await rowsOf(t, perCity)).sort((a, b) => String(a.city).localeCompare(String(b.city)));
    expect(rows).toEqual([
      { city: 'Lyon', orders: 2, total: 101, customers: 1 },
      { city: 'Nice', orders: 1, total: 7.25, customers: 1 },
      { city: 'Paris', orders: 2, total: 25.5, customers: 1 },
    ]);

    const joined = await emptyDataset(t, project, 'orders_named');
    const join = await createRecipe(t, { project_id: project, name: 'named', type: 'join', inputs: [orders, customers], outputs: [joined], params: { type: 'left', on: [{ left: 'customer', right: 'customer' }] } });
    expect((await runRecipe(t, join)).status).toBe('succeeded');
    const named = await rowsOf(t, joined);
    expect(named.map((r) => [r.id, r.name])).toEqual([
      [1, 'Ada'],
      [2, 'Ada'],
      [3, 'Bob'],
      [4, null],
      [5, null],
    ]);
  });

  it('runs a sql recipe over the inputs by dataset name, typed by the database', async () => {
    const out = await emptyDataset(t, project, 'sql_out');
    const recipe = await createRecipe(t, { project_id: project, name: 'sql', type: 'sql', inputs: [orders], outputs: [out], params: { query: 'select city, sum(amount) as total, max(day) as last_day from orders group by city order by city' } });
    const schema = await t.request('GET', `/api/pipeline/recipes/${recipe}/schema`);
    expect(schema.status, schema.text).toBe(200);
    expect(schema.body.outputs[0].columns.map((c: { name: string }) => c.name)).toEqual(['city', 'total', 'last_day']);
    const run = await runRecipe(t, recipe);
    expect(run.status, JSON.stringify(run)).toBe('succeeded');
    expect(await rowsOf(t, out)).toEqual([
      { city: 'Lyon', total: 101, last_day: '2026-01-04' },
      { city: 'Nice', total: 7.25, last_day: '2026-01-03' },
      { city: 'Paris', total: 25.5, last_day: '2026-01-02' },
    ]);
  });
});
