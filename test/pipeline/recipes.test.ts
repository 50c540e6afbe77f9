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

  it('refuses a sql recipe whose query is not one read-only SELECT over its inputs, with a 400 at body.params.query', async () => {
    const out = await emptyDataset(t, project, 'hostile_out');
    const hostile = [
      'select * from orders; drop table orders',
      'delete from orders',
      'select * from customers',
      'select * from org_1__ds_1',
      "select 'unterminated from orders",
      'select * from orders\u0000; drop table orders',
      'with x as (delete from orders returning *) select * from x',
      `select ${"'a'||".repeat(20_000)}'a' as a from orders`,
    ];
    for (const [i, query] of hostile.entries()) {
      const res = await t.request('POST', '/api/pipeline/recipes', { body: { project_id: project, name: `hostile ${i}`, type: 'sql', inputs: [orders], outputs: [out], params: { query } } });
      expect(res.status, `${query.slice(0, 60)}: ${res.text.slice(0, 300)}`).toBe(400);
      expect(res.body.errors?.[0]?.path, query.slice(0, 60)).toMatch(/^body\.params\.query/);
    }
    // A comment left open: Postgres refuses it, SQLite reads it to the end of the text (its wrapper
    // closes it, so it swallows nothing of the platform's); either way nothing else is touched.
    const open = await t.request('POST', '/api/pipeline/recipes', { body: { project_id: project, name: 'open comment', type: 'sql', inputs: [orders], outputs: [out], params: { query: 'select city from orders /* never closed' } } });
    expect([201, 400]).toContain(open.status);
    if (open.status === 201) {
      expect((await runRecipe(t, open.body.id)).status).toBe('succeeded');
      expect(await rowsOf(t, out)).toHaveLength(5);
      expect((await t.request('DELETE', `/api/pipeline/recipes/${open.body.id}`)).status).toBe(204);
    }
    // Quotes and comments of both dialects inside a valid query are just text.
    const quoted = await createRecipe(t, { project_id: project, name: 'quoted', type: 'sql', inputs: [orders], outputs: [out], params: { query: "select 'it''s -- not a comment /* nor this */' as q, city from orders -- a real comment\nwhere id = 1" } });
    expect((await runRecipe(t, quoted)).status).toBe('succeeded');
    expect(await rowsOf(t, out)).toEqual([{ q: "it's -- not a comment /* nor this */", city: 'Paris' }]);
    // The input still holds its rows.
    expect((await t.request('GET', `/api/datasets/${orders}`)).body.row_count).toBe(5);
  });

  it('publishes dataset.updated for each output in the transaction that swaps it in, with its new version', async () => {
    const out = await emptyDataset(t, project, 'evented');
    const recipe = await createRecipe(t, { project_id: project, name: 'evented', type: 'distinct', inputs: [orders], outputs: [out], params: { columns: ['city'] } });
    await runRecipe(t, recipe);
    await runRecipe(t, recipe);
    const events = await t.kernel.storage.db.selectFrom('event_outbox').select(['type', 'payload']).where('type', '=', 'dataset.updated').orderBy('id').execute();
    const mine = events.map((e) => t.kernel.storage.decodeJson<{ dataset_id: number; version: number; row_count: number; mode: string }>(e.payload)).filter((p) => p.dataset_id === out);
    expect(mine).toEqual([
      { dataset_id: out, name: 'evented', version: 2, row_count: 3, mode: 'replace' },
      { dataset_id: out, name: 'evented', version: 3, row_count: 3, mode: 'replace' },
    ]);
  });

  it('saves recipes and swaps outputs in while other runs write their outputs', async () => {
    const outputs = await Promise.all(Array.from({ length: 6 }, (_, i) => emptyDataset(t, project, `busy_${i}`)));
    const created = await Promise.all(outputs.map((out, i) => t.request('POST', '/api/pipeline/recipes', { body: { project_id: project, name: `busy ${i}`, type: 'group', inputs: [orders], outputs: [out], params: { keys: ['city'], aggregations: [{ fn: 'count', as: 'n' }] } } })));
    for (const res of created) expect(res.status, res.text).toBe(201);
    const runs = await Promise.all(created.map((res) => runRecipe(t, res.body.id)));
    for (const run of runs) expect(run.status, JSON.stringify(run)).toBe('succeeded');
    // More saves and runs, all at once.
    const more = await Promise.all(outputs.map((out, i) => t.request('PATCH', `/api/pipeline/recipes/${created[i].body.id}`, { body: { params: { keys: ['city'], aggregations: [{ fn: 'count', as: 'rows' }] } } })));
    for (const res of more) expect(res.status, res.text).toBe(200);
    const again = await Promise.all(created.map((res) => runRecipe(t, res.body.id)));
    for (const run of again) expect(run.status, JSON.stringify(run)).toBe('succeeded');
    for (const out of outputs) expect((await t.request('GET', `/api/datasets/${out}`)).body).toMatchObject({ version: 3, row_count: 3 });
  });
});
