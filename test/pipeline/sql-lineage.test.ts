import { describe, expect, it } from 'vitest';
import { sqlColumnOrigins } from '../../plugins/recipes/sql-lineage.ts';
import type { RecipeDataset } from '../../plugins/pipeline/public.ts';

const orders: RecipeDataset = {
  id: 1,
  name: 'orders',
  columns: [
    { name: 'id', type: 'integer' },
    { name: 'customer_id', type: 'integer' },
    { name: 'amount', type: 'number' },
    { name: 'day', type: 'date' },
  ],
};
const customers: RecipeDataset = {
  id: 2,
  name: 'Customers',
  columns: [
    { name: 'id', type: 'integer' },
    { name: 'name', type: 'string' },
  ],
};
const inputs = [orders, customers];

/** The origins of a query's result columns (named as the database would answer them; types do not matter here). */
const origins = (query: string, names: string[]) => sqlColumnOrigins(query, inputs, names.map((name) => ({ name, type: 'string' })));

describe('sql recipe column origins', () => {
  it('follows plain columns, aliases, casts, expressions and aggregates', async () => {
    const result = await origins('select o.id, amount as total, cast(day as text) as d, amount::int, amount * 2 + id as doubled, sum(amount) s, count(*) n, 1 as one from orders o group by o.id, amount, day', [
      'id', 'total', 'd', 'amount', 'doubled', 's', 'n', 'one',
    ]);
    expect(result).toEqual([
      { from: [{ input: 0, column: 'id' }], transformation: 'identity' },
      { from: [{ input: 0, column: 'amount' }], transformation: 'renamed' },
      { from: [{ input: 0, column: 'day' }], transformation: 'cast' },
      { from: [{ input: 0, column: 'amount' }], transformation: 'cast' },
      { from: [{ input: 0, column: 'amount' }, { input: 0, column: 'id' }], transformation: 'derived' },
      { from: [{ input: 0, column: 'amount' }], transformation: 'aggregated' },
      { from: [], transformation: 'aggregated' },
      { from: [], transformation: 'derived' },
    ]);
  });

  it('expands * and t.* over joins, matching dataset names ignoring case', async () => {
    const result = await origins('select c.*, o.amount from orders o join customers c on c.id = o.customer_id', ['id', 'name', 'amount']);
    expect(result).toEqual([
      { from: [{ input: 1, column: 'id' }], transformation: 'identity' },
      { from: [{ input: 1, column: 'name' }], transformation: 'identity' },
      { from: [{ input: 0, column: 'amount' }], transformation: 'identity' },
    ]);
    const all = await origins('select * from customers', ['id', 'name']);
    expect(all.map((o) => o.from)).toEqual([[{ input: 1, column: 'id' }], [{ input: 1, column: 'name' }]]);
  });

  it('resolves through WITH queries, subqueries and set operations', async () => {
    const result = await origins(
      `with big as (select customer_id as who, amount from orders where amount > 10),
            per as (select who, sum(amount) as spent from big group by who)
       select n.name, per.spent, x.k from per join (select id as k, name from customers) n on n.k = per.who, (select who as k from big) x`,
      ['name', 'spent', 'k'],
    );
    expect(result).toEqual([
      { from: [{ input: 1, column: 'name' }], transformation: 'identity' },
      { from: [{ input: 0, column: 'amount' }], transformation: 'aggregated' },
      { from: [{ input: 0, column: 'customer_id' }], transformation: 'renamed' },
    ]);
    // Named like an input column, but computed from constants (name matching would say identity).
    expect(await origins('select v.id from (values (1, 2)) v(id, b)', ['id'])).toEqual([{ from: [], transformation: 'derived' }]);
    const union = await origins('select id from orders union all select id from customers', ['id']);
    expect(union).toEqual([{ from: [{ input: 0, column: 'id' }, { input: 1, column: 'id' }], transformation: 'identity' }]);
  });

  it('follows the value a scalar subquery answers (its conditions, like join keys, are not origins)', async () => {
    const [origin] = await origins('select (select max(amount) from orders o where o.customer_id = c.id) as top from customers c', ['top']);
    expect(origin).toEqual({ from: [{ input: 0, column: 'amount' }], transformation: 'aggregated' });
  });

  it('falls back to matching names when the query cannot be parsed or resolved', async () => {
    // SQLite-only syntax, a table function, a USING join: each name matched on its own.
    for (const query of ['select id, amount from orders where amount glob 1 limit 1, 2', 'select id, x from orders, generate_series(1, 2) x', 'select id, amount from orders join customers using (id)']) {
      expect(await origins(query, ['id', 'x'])).toEqual([
        { from: [{ input: 0, column: 'id' }], transformation: 'identity' },
        { from: [], transformation: 'derived' },
      ]);
    }
    // The parse disagrees with the database on the count of columns.
    expect(await origins('select id from orders', ['id', 'amount'])).toEqual([
      { from: [{ input: 0, column: 'id' }], transformation: 'identity' },
      { from: [{ input: 0, column: 'amount' }], transformation: 'identity' },
    ]);
  });
});
