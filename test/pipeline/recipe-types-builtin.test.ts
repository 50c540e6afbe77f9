/**
 * The built-in recipe types (plugins/recipes/*.ts) through HTTP, on both dialects: each type's
 * result row by row, its output columns and types, the 4xx its parameters may earn, and what every
 * run shares (versions, schema changes, planned schema, hostile names, PII).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { createRecipe, emptyDataset, loadDataset, rowsOf, runRecipe } from './pipeline-helpers.ts';

type Row = Record<string, unknown>;

describe.each(DIALECTS)('built-in recipe types (%s)', (dialect) => {
  let t: TestKernel;
  let project: number;
  let counter = 0;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    const created = await t.request('POST', '/api/projects', { body: { key: 'BUILTIN', name: 'Built-in recipe types' } });
    expect(created.status, created.text).toBe(201);
    project = created.body.id;
  });
  afterAll(async () => t?.stop());

  // ---- helpers -------------------------------------------------------------------------------

  /** A unique dataset or recipe name. */
  const unique = (prefix: string) => `${prefix}_${++counter}`;

  /** A loaded input dataset: `columns` as `name:type`, `rows` as CSV lines. */
  const input = (prefix: string, columns: string[], rows: string[], options: { pii?: string[] } = {}) => loadDataset(t, project, unique(prefix), columns, rows, options);

  /** An empty output dataset. */
  const output = (prefix = 'out') => emptyDataset(t, project, unique(prefix));

  /** POST /api/pipeline/recipes as it answers (for the refusals). */
  const attempt = (type: string, inputs: number[], outputs: number[], params: unknown, token?: string) =>
    t.request('POST', '/api/pipeline/recipes', { token, body: { project_id: project, name: unique(type), type, inputs, outputs, params } });

  const recipe = (type: string, inputs: number[], outputs: number[], params: unknown) => createRecipe(t, { project_id: project, name: unique(type), type, inputs, outputs, params });

  /** Runs the recipe and expects it to succeed. */
  async function succeed(recipeId: number, token?: string): Promise<Record<string, any>> {
    const run = await runRecipe(t, recipeId, token);
    expect(run.status, JSON.stringify(run)).toBe('succeeded');
    return run;
  }

  /** Runs `work` on each item one after another (saves and runs at once: recipes.test.ts). */
  async function serially<T, R>(items: T[], work: (item: T, index: number) => Promise<R>): Promise<R[]> {
    const done: R[] = [];
    for (const [i, item] of items.entries()) done.push(await work(item, i));
    return done;
  }

  /** Creates a one-output recipe, runs it, and answers the output's rows. */
  async function result(type: string, inputs: number[], params: unknown): Promise<Row[]> {
    const out = await output(type);
    await succeed(await recipe(type, inputs, [out], params));
    return rowsOf(t, out);
  }

  const dataset = async (id: number) => {
    const res = await t.request('GET', `/api/datasets/${id}`);
    expect(res.status, res.text).toBe(200);
    return res.body as { name: string; version: number; columns: { name: string; type: string; pii: boolean }[] };
  };

  /** The dataset's columns as `name:type`. */
  const columnsOf = async (id: number) => (await dataset(id)).columns.map((c) => `${c.name}:${c.type}`);

  /** Rows in a stable order (by the JSON of the values listed). */
  const sorted = (rows: Row[], ...keys: string[]) => [...rows].sort((a, b) => JSON.stringify(keys.map((k) => a[k])).localeCompare(JSON.stringify(keys.map((k) => b[k]))));

  /** A problem answer with `status` whose field errors name `path` (and, if given, say `message`). */
  function expectProblem(res: { status: number; text: string; body: any }, status: number, path: string, message?: RegExp) {
    expect(res.status, res.text).toBe(status);
    const errors = (res.body.errors ?? []) as { path: string; message: string }[];
    expect(errors.map((e) => e.path), res.text).toContain(path);
    if (message) expect(errors.find((e) => e.path === path)!.message, res.text).toMatch(message);
  }

  // ---- select --------------------------------------------------------------------------------

  describe('select', () => {
    it('keeps, reorders, renames and casts columns; the output takes those columns and types', async () => {
      const source = await input('sel', ['id:integer', 'code:string', 'amount:number', 'name:string'], ['1,12,2.25,Ada', '2,-7,-3.75,Bob', '3,,,', '4,0012,2.5,Di', '5,-0,-2.5,Ed', '6,3,3.5,Flo']);
      const out = await output();
      const id = await recipe('select', [source], [out], {
        columns: [
          { name: 'name' },
          { name: 'id', as: 'ident', type: 'string' },
          { name: 'code', type: 'integer' },
          { name: 'amount', as: 'whole', type: 'integer' },
          { name: 'amount' },
        ],
      });
      await succeed(id);
      expect(await columnsOf(out)).toEqual(['name:string', 'ident:string', 'code:integer', 'whole:integer', 'amount:number']);
      expect(await rowsOf(t, out)).toEqual([
        { name: 'Ada', ident: '1', code: 12, whole: 2, amount: 2.25 },
        { name: 'Bob', ident: '2', code: -7, whole: -4, amount: -3.75 },
        { name: null, ident: '3', code: null, whole: null, amount: null },
        // Numbers round to the nearest integer, halves away from zero, on both dialects.
        { name: 'Di', ident: '4', code: 12, whole: 3, amount: 2.5 },
        { name: 'Ed', ident: '5', code: 0, whole: -3, amount: -2.5 },
        { name: 'Flo', ident: '6', code: 3, whole: 4, amount: 3.5 },
      ]);
    });

    it('refuses two output columns of one name (400 naming body.params.columns) and an unknown column (body.params.columns.0.name)', async () => {
      const source = await input('sel', ['id:integer', 'name:string'], ['1,a']);
      const out = await output();
      expectProblem(await attempt('select', [source], [out], { columns: [{ name: 'id' }, { name: 'name', as: 'ID' }] }), 400, 'body.params.columns', /duplicate/);
      expectProblem(await attempt('select', [source], [out], { columns: [{ name: 'nope' }] }), 400, 'body.params.columns.0.name', /unknown column/);
      expectProblem(await attempt('select', [source], [out], { columns: [{ name: 'id', type: 'decimal' }] }), 400, 'body.params.columns.0.type');
    });

    it('refuses output names a dataset column may not have: the row id, more than 63 bytes, control characters (400)', async () => {
      const source = await input('sel', ['id:integer', 'name:string'], ['1,a']);
      const out = await output();
      expectProblem(await attempt('select', [source], [out], { columns: [{ name: 'name' }, { name: 'id', as: '_ROW_ID' }] }), 400, 'body.params.columns.1.as', /reserved/);
      expectProblem(await attempt('select', [source], [out], { columns: [{ name: 'id', as: 'é'.repeat(40) }] }), 400, 'body.params.columns.0.as', /63 bytes/);
      expectProblem(await attempt('select', [source], [out], { columns: [{ name: 'id', as: 'a\u0007b' }] }), 400, 'body.params.columns.0.as', /control/);
      expectProblem(await attempt('group', [source], [out], { aggregations: [{ fn: 'count', as: 'ü'.repeat(32) }] }), 400, 'body.params.aggregations.0.as', /63 bytes/);
      expectProblem(await attempt('join', [source, source], [out], { on: [{ left: 'id', right: 'id' }], columns: [{ input: 'left', name: 'id', as: '_row_id' }] }), 400, 'body.params.columns.0.as', /reserved/);
    });
  });

  // ---- filter --------------------------------------------------------------------------------

  describe('filter', () => {
    const ROWS = ['1,Ada,10,2026-01-01', '2,Bob,5.5,2026-01-02', "3,O'Brien -- x,,2026-01-03", '4,*/ ; drop table x; /*,20,', '5,Cy,7,2026-01-05'];
    const COLUMNS = ['id:integer', 'name:string', 'amount:number', 'day:date'];

    it('supports each operator of the rows filter language, and and/or', async () => {
      const source = await input('flt', COLUMNS, ROWS);
      const cases: [string[], 'and' | 'or' | undefined, number[]][] = [
        [['id:eq:2'], undefined, [2]],
        [['name:ne:Ada'], undefined, [2, 3, 4, 5]],
        [['amount:lt:7'], undefined, [2]],
        [['amount:lte:7'], undefined, [2, 5]],
        [['amount:gt:7'], undefined, [1, 4]],
        [['amount:gte:10'], undefined, [1, 4]],
        [['id:in:1,3,5'], undefined, [1, 3, 5]],
        [['name:in:Ada,Cy'], undefined, [1, 5]],
        [['amount:is_null:true'], undefined, [3]],
        [['amount:is_null:false'], undefined, [1, 2, 4, 5]],
        [['day:gt:2026-01-02'], undefined, [3, 5]],
        [['amount:gt:5', 'day:is_null:false'], 'and', [1, 2, 5]],
        [['amount:gt:5', 'day:is_null:false'], undefined, [1, 2, 5]],
        [['id:eq:1', 'amount:is_null:true'], 'or', [1, 3]],
      ];
      const outcomes = await serially(cases, ([conditions, combine]) => result('filter', [source], combine ? { conditions, combine } : { conditions }));
      outcomes.forEach((rows, i) => expect(rows.map((r) => r.id), JSON.stringify(cases[i])).toEqual(cases[i][2]));
    });

    it('keeps every column, typed as in the input', async () => {
      const source = await input('flt', COLUMNS, ROWS);
      const out = await output();
      await succeed(await recipe('filter', [source], [out], { conditions: ['id:lte:2'] }));
      expect(await columnsOf(out)).toEqual(COLUMNS);
      expect(await rowsOf(t, out)).toEqual([
        { id: 1, name: 'Ada', amount: 10, day: '2026-01-01' },
        { id: 2, name: 'Bob', amount: 5.5, day: '2026-01-02' },
      ]);
    });

    it('matches values holding quotes and comments of both dialects literally', async () => {
      const source = await input('flt', COLUMNS, ROWS);
      const quoted = await result('filter', [source], { conditions: ["name:eq:O'Brien -- x"] });
      const listed = await result('filter', [source], { conditions: ["name:in:O'Brien -- x,*/ ; drop table x; /*"] });
      expect(quoted.map((r) => r.id)).toEqual([3]);
      expect(listed.map((r) => r.id)).toEqual([3, 4]);
      expect((await rowsOf(t, source)).length).toBe(5);
    });

    // `contains` compiles to `lower(…) like … escape '\'`, which Postgres parses as a call of
    // pg_catalog.like_escape: governed SQL admits it as the syntax it is.
    it('contains matches a substring regardless of case, its value literally (quotes, comments, % and _)', async () => {
      const source = await input('flt', COLUMNS, ROWS);
      const cases: [string, number[]][] = [
        ['name:contains:b', [2, 3, 4]],
        ['name:contains:BRIEN', [3]],
        ['name:contains:*/ ; drop table x; /*', [4]],
        ["name:contains:'brien -- ", [3]],
        ['name:contains:%', []],
        ['name:contains:_', []],
      ];
      const outcomes = await serially(cases, ([condition]) => result('filter', [source], { conditions: [condition] }));
      outcomes.forEach((rows, i) => expect(rows.map((r) => r.id), cases[i][0]).toEqual(cases[i][1]));
    });

    it('refuses a value of the wrong type, an unknown operator or column, each naming the condition (400)', async () => {
      const source = await input('flt', COLUMNS, ROWS);
      const out = await output();
      expectProblem(await attempt('filter', [source], [out], { conditions: ['amount:gt:abc'] }), 400, 'body.params.conditions.0');
      expectProblem(await attempt('filter', [source], [out], { conditions: ['id:eq:1', 'day:lt:yesterday'] }), 400, 'body.params.conditions.1');
      expectProblem(await attempt('filter', [source], [out], { conditions: ['id:like:1'] }), 400, 'body.params.conditions.0', /operator/);
      expectProblem(await attempt('filter', [source], [out], { conditions: ['nope:eq:1'] }), 400, 'body.params.conditions.0', /unknown column/);
      expectProblem(await attempt('filter', [source], [out], { conditions: ['id:eq:1'], combine: 'xor' }), 400, 'body.params.combine');
    });
  });

  // ---- join ----------------------------------------------------------------------------------

  describe('join', () => {
    let left: number;
    let right: number;
    let rightName: string;

    beforeAll(async () => {
      left = await input('jl', ['k:integer', 'k2:string', 'name:string', 'v:integer'], ['1,a,L1,10', '2,b,L2,20', '3,c,L3,30']);
      right = await input('jr', ['k:integer', 'k2:string', 'name:string', 'w:integer'], ['1,a,R1,100', '2,x,R2,200', '4,d,R4,400']);
      rightName = (await dataset(right)).name;
    });

    it('joins on one key: inner, left, right, full, the right columns the left has prefixed with the right dataset name', async () => {
      const types = ['inner', 'left', 'right', 'full'] as const;
      const outs = await serially([...types], async (type) => {
        const out = await output('joined');
        await succeed(await recipe('join', [left, right], [out], { type, on: [{ left: 'k', right: 'k' }] }));
        return out;
      });
      const k2 = `${rightName}_k2`;
      const name = `${rightName}_name`;
      expect(await columnsOf(outs[0])).toEqual(['k:integer', 'k2:string', 'name:string', 'v:integer', `${k2}:string`, `${name}:string`, 'w:integer']);
      const row = (k: number, lk2: string | null, ln: string | null, v: number | null, rk2: string | null, rn: string | null, w: number | null) => ({ k, k2: lk2, name: ln, v, [k2]: rk2, [name]: rn, w });
      const matched = [row(1, 'a', 'L1', 10, 'a', 'R1', 100), row(2, 'b', 'L2', 20, 'x', 'R2', 200)];
      const leftOnly = row(3, 'c', 'L3', 30, null, null, null);
      const rightOnly = row(4, null, null, null, 'd', 'R4', 400);
      const results = await Promise.all(outs.map(async (out) => sorted(await rowsOf(t, out), 'k')));
      expect(results[0]).toEqual(matched);
      expect(results[1]).toEqual([...matched, leftOnly]);
      expect(results[2]).toEqual([...matched, rightOnly]);
      expect(results[3]).toEqual([...matched, leftOnly, rightOnly]);
    });

    it('joins on two keys (inner and full)', async () => {
      const on = [
        { left: 'k', right: 'k' },
        { left: 'k2', right: 'k2' },
      ];
      const [inner, full] = await serially([{ on }, { type: 'full', on }], async (params) => {
        const out = await output('joined');
        await succeed(await recipe('join', [left, right], [out], params));
        return out;
      });
      const name = `${rightName}_name`;
      expect(await columnsOf(inner)).toEqual(['k:integer', 'k2:string', 'name:string', 'v:integer', `${name}:string`, 'w:integer']);
      expect(await rowsOf(t, inner)).toEqual([{ k: 1, k2: 'a', name: 'L1', v: 10, [name]: 'R1', w: 100 }]);
      expect(sorted(await rowsOf(t, full), 'k', 'k2')).toEqual([
        { k: 1, k2: 'a', name: 'L1', v: 10, [name]: 'R1', w: 100 },
        { k: 2, k2: 'b', name: 'L2', v: 20, [name]: null, w: null },
        { k: 2, k2: 'x', name: null, v: null, [name]: 'R2', w: 200 },
        { k: 3, k2: 'c', name: 'L3', v: 30, [name]: null, w: null },
        { k: 4, k2: 'd', name: null, v: null, [name]: 'R4', w: 400 },
      ]);
    });

    it('writes the columns listed, renamed', async () => {
      const out = await output('joined');
      const id = await recipe('join', [left, right], [out], {
        type: 'left',
        on: [{ left: 'k', right: 'k' }],
        columns: [
          { input: 'right', name: 'k', as: 'right_k' },
          { input: 'left', name: 'name', as: 'left_name' },
          { input: 'right', name: 'name', as: 'right_name' },
          { input: 'right', name: 'w' },
        ],
      });
      await succeed(id);
      expect(await columnsOf(out)).toEqual(['right_k:integer', 'left_name:string', 'right_name:string', 'w:integer']);
      expect(sorted(await rowsOf(t, out), 'left_name')).toEqual([
        { right_k: 1, left_name: 'L1', right_name: 'R1', w: 100 },
        { right_k: 2, left_name: 'L2', right_name: 'R2', w: 200 },
        { right_k: null, left_name: 'L3', right_name: null, w: null },
      ]);
    });

    it('joins a dataset with itself', async () => {
      const staff = await input('staff', ['id:integer', 'boss:integer', 'name:string'], ['1,,Ada', '2,1,Bob', '3,1,Cy', '4,2,Di']);
      const staffName = (await dataset(staff)).name;
      const out = await output('joined');
      await succeed(await recipe('join', [staff, staff], [out], { type: 'left', on: [{ left: 'boss', right: 'id' }] }));
      expect(await columnsOf(out)).toEqual(['id:integer', 'boss:integer', 'name:string', `${staffName}_id:integer`, `${staffName}_boss:integer`, `${staffName}_name:string`]);
      expect(sorted(await rowsOf(t, out), 'id').map((r) => [r.name, r[`${staffName}_name`]])).toEqual([
        ['Ada', null],
        ['Bob', 'Ada'],
        ['Cy', 'Ada'],
        ['Di', 'Bob'],
      ]);
    });

    it('refuses an unknown key or listed column (400 naming it) and two listed columns of one name', async () => {
      const out = await output('joined');
      expectProblem(await attempt('join', [left, right], [out], { on: [{ left: 'k', right: 'nope' }] }), 400, 'body.params.on.0.right', /unknown column/);
      expectProblem(await attempt('join', [left, right], [out], { on: [{ left: 'nope', right: 'k' }] }), 400, 'body.params.on.0.left', /unknown column/);
      expectProblem(await attempt('join', [left, right], [out], { on: [{ left: 'k', right: 'k' }], columns: [{ input: 'right', name: 'v' }] }), 400, 'body.params.columns.0.name');
      expectProblem(
        await attempt('join', [left, right], [out], {
          on: [{ left: 'k', right: 'k' }],
          columns: [
            { input: 'left', name: 'name' },
            { input: 'right', name: 'name' },
          ],
        }),
        400,
        'body.params.columns',
      );
      expectProblem(await attempt('join', [left], [out], { on: [{ left: 'k', right: 'k' }] }), 422, 'body.inputs');
    });

    it('asks for the columns when a prefixed name would be too long for a column (422 naming body.params.columns)', async () => {
      const long = await loadDataset(t, project, `${'r'.repeat(58)}_${++counter}`, ['k:integer', 'name:string'], ['1,x']);
      const out = await output('joined');
      expectProblem(await attempt('join', [left, long], [out], { on: [{ left: 'k', right: 'k' }] }), 422, 'body.params.columns');
      await succeed(
        await recipe('join', [left, long], [out], {
          on: [{ left: 'k', right: 'k' }],
          columns: [
            { input: 'left', name: 'name' },
            { input: 'right', name: 'name', as: 'long_name' },
          ],
        }),
      );
      expect(await rowsOf(t, out)).toEqual([{ name: 'L1', long_name: 'x' }]);
    });
  });

  // ---- group ---------------------------------------------------------------------------------

  describe('group', () => {
    let source: number;

    beforeAll(async () => {
      source = await input('grp', ['city:string', 'n:integer', 'x:number', 's:string', 'd:date'], ['Paris,1,1.5,b,2026-01-03', 'Paris,2,2.5,a,2026-01-01', 'Lyon,5,,c,2026-02-01', 'Lyon,5,4,,', 'Nice,,,,']);
    });

    it('aggregates per key: count, count_distinct, sum, avg, min, max, typed by function', async () => {
      const out = await output('grouped');
      const aggregations = [
        { fn: 'count', as: 'rows' },
        { column: 'x', fn: 'count', as: 'cx' },
        { column: 'n', fn: 'count_distinct', as: 'dn' },
        { column: 'n', fn: 'sum', as: 'sn' },
        { column: 'x', fn: 'sum', as: 'sx' },
        { column: 'n', fn: 'avg', as: 'an' },
        { column: 'x', fn: 'avg', as: 'ax' },
        { column: 'n', fn: 'min', as: 'minn' },
        { column: 'x', fn: 'max', as: 'maxx' },
        { column: 's', fn: 'min', as: 'mins' },
        { column: 's', fn: 'max', as: 'maxs' },
        { column: 'd', fn: 'min', as: 'mind' },
        { column: 'd', fn: 'max', as: 'maxd' },
      ];
      await succeed(await recipe('group', [source], [out], { keys: ['city'], aggregations }));
      expect(await columnsOf(out)).toEqual([
        'city:string',
        'rows:integer',
        'cx:integer',
        'dn:integer',
        'sn:integer',
        'sx:number',
        'an:number',
        'ax:number',
        'minn:integer',
        'maxx:number',
        'mins:string',
        'maxs:string',
        'mind:date',
        'maxd:date',
      ]);
      expect(sorted(await rowsOf(t, out), 'city')).toEqual([
        { city: 'Lyon', rows: 2, cx: 1, dn: 1, sn: 10, sx: 4, an: 5, ax: 4, minn: 5, maxx: 4, mins: 'c', maxs: 'c', mind: '2026-02-01', maxd: '2026-02-01' },
        { city: 'Nice', rows: 1, cx: 0, dn: 0, sn: null, sx: null, an: null, ax: null, minn: null, maxx: null, mins: null, maxs: null, mind: null, maxd: null },
        { city: 'Paris', rows: 2, cx: 2, dn: 2, sn: 3, sx: 4, an: 1.5, ax: 2, minn: 1, maxx: 2.5, mins: 'a', maxs: 'b', mind: '2026-01-01', maxd: '2026-01-03' },
      ]);
    });

    it('without keys writes one row, also over an empty input', async () => {
      const empty = await input('grp_empty', ['n:integer'], []);
      const aggregations = [
        { fn: 'count', as: 'rows' },
        { column: 'n', fn: 'sum', as: 'total' },
      ];
      const all = await result('group', [source], { aggregations });
      const none = await result('group', [empty], { keys: [], aggregations });
      expect(all).toEqual([{ rows: 5, total: 13 }]);
      expect(none).toEqual([{ rows: 0, total: null }]);
    });

    it('refuses sum or avg of a string column, an aggregation without its column, an unknown column and a duplicate name (400)', async () => {
      const out = await output('grouped');
      expectProblem(await attempt('group', [source], [out], { keys: ['city'], aggregations: [{ column: 's', fn: 'sum', as: 'total' }] }), 400, 'body.params.aggregations.0.column', /numeric/);
      expectProblem(await attempt('group', [source], [out], { aggregations: [{ fn: 'count', as: 'c' }, { column: 'd', fn: 'avg', as: 'a' }] }), 400, 'body.params.aggregations.1.column', /numeric/);
      expectProblem(await attempt('group', [source], [out], { aggregations: [{ fn: 'max', as: 'm' }] }), 400, 'body.params.aggregations.0.column');
      expectProblem(await attempt('group', [source], [out], { keys: ['nope'], aggregations: [{ fn: 'count', as: 'c' }] }), 400, 'body.params.keys.0', /unknown column/);
      expectProblem(await attempt('group', [source], [out], { keys: ['city'], aggregations: [{ fn: 'count', as: 'City' }] }), 400, 'body.params.aggregations');
      expectProblem(await attempt('group', [source], [out], { aggregations: [{ column: 'n', fn: 'median', as: 'm' }] }), 400, 'body.params.aggregations.0.fn');
    });
  });

  // ---- stack ---------------------------------------------------------------------------------

  describe('stack', () => {
    it('stacks two and three inputs whose columns come in another order, with and without distinct', async () => {
      const a = await input('stk', ['a:integer', 'b:string'], ['1,x', '2,y']);
      const b = await input('stk', ['b:string', 'a:integer'], ['y,2', 'z,3']);
      const c = await input('stk', ['a:integer', 'b:string'], ['1,x']);
      const cases: [number[], unknown][] = [
        [[a, b], {}],
        [[a, b, c], { distinct: false }],
        [[a, b, c], { distinct: true }],
      ];
      const [two, three, threeDistinct] = await serially(cases, async ([inputs, params]) => {
        const out = await output('stacked');
        await succeed(await recipe('stack', inputs, [out], params));
        return out;
      });
      expect(await columnsOf(two)).toEqual(['a:integer', 'b:string']);
      expect(sorted(await rowsOf(t, two), 'a', 'b')).toEqual([
        { a: 1, b: 'x' },
        { a: 2, b: 'y' },
        { a: 2, b: 'y' },
        { a: 3, b: 'z' },
      ]);
      expect(sorted(await rowsOf(t, three), 'a', 'b')).toEqual([
        { a: 1, b: 'x' },
        { a: 1, b: 'x' },
        { a: 2, b: 'y' },
        { a: 2, b: 'y' },
        { a: 3, b: 'z' },
      ]);
      expect(sorted(await rowsOf(t, threeDistinct), 'a', 'b')).toEqual([
        { a: 1, b: 'x' },
        { a: 2, b: 'y' },
        { a: 3, b: 'z' },
      ]);
    });

    it('refuses inputs whose columns differ (422 naming the input) and a single input (422)', async () => {
      const a = await input('stk', ['a:integer', 'b:string'], ['1,x']);
      const otherType = await input('stk', ['a:string', 'b:string'], ['1,x']);
      const otherName = await input('stk', ['a:integer', 'c:string'], ['1,x']);
      const fewer = await input('stk', ['a:integer'], ['1']);
      const out = await output('stacked');
      expectProblem(await attempt('stack', [a, otherType], [out], {}), 422, 'body.inputs.1');
      expectProblem(await attempt('stack', [a, a, otherName], [out], {}), 422, 'body.inputs.2');
      expectProblem(await attempt('stack', [a, fewer], [out], {}), 422, 'body.inputs.1');
      expectProblem(await attempt('stack', [a], [out], {}), 422, 'body.inputs', /takes at least 2/);
    });
  });

  // ---- distinct, top_n, sample -----------------------------------------------------------------

  describe('distinct', () => {
    it('removes duplicate rows over every column, or over the columns named (the output has those)', async () => {
      const source = await input('dst', ['a:integer', 'b:string'], ['1,x', '1,x', '1,y', '2,y', ',', ',']);
      const [all, some] = await serially([{}, { columns: ['b'] }], async (params) => {
        const out = await output('distinct');
        await succeed(await recipe('distinct', [source], [out], params));
        return out;
      });
      expect(await columnsOf(all)).toEqual(['a:integer', 'b:string']);
      expect(sorted(await rowsOf(t, all), 'a', 'b')).toEqual([
        { a: 1, b: 'x' },
        { a: 1, b: 'y' },
        { a: 2, b: 'y' },
        { a: null, b: null },
      ]);
      expect(await columnsOf(some)).toEqual(['b:string']);
      expect(sorted(await rowsOf(t, some), 'b')).toEqual([{ b: 'x' }, { b: 'y' }, { b: null }]);
      expectProblem(await attempt('distinct', [source], [await output('distinct')], { columns: ['nope'] }), 400, 'body.params.columns.0', /unknown column/);
    });
  });

  describe('top_n', () => {
    it('keeps the first rows in the order given, empty values last both ways, in that order', async () => {
      const source = await input('top', ['id:integer', 'v:number'], ['1,5', '2,', '3,9', '4,1', '5,9']);
      const [asc, desc, few] = await serially(
        [
          { order_by: [{ column: 'v' }, { column: 'id', direction: 'asc' }], limit: 10 },
          { order_by: [{ column: 'v', direction: 'desc' }, { column: 'id', direction: 'desc' }], limit: 10 },
          { order_by: [{ column: 'v', direction: 'desc' }, { column: 'id' }], limit: 2 },
        ],
        (params) => result('top_n', [source], params),
      );
      expect(asc.map((r) => r.id)).toEqual([4, 1, 3, 5, 2]);
      expect(desc.map((r) => r.id)).toEqual([5, 3, 1, 4, 2]);
      expect(few).toEqual([
        { id: 3, v: 9 },
        { id: 5, v: 9 },
      ]);
      expectProblem(await attempt('top_n', [source], [await output()], { order_by: [{ column: 'nope' }], limit: 1 }), 400, 'body.params.order_by.0.column');
      expectProblem(await attempt('top_n', [source], [await output()], { order_by: [{ column: 'id' }], limit: 0 }), 400, 'body.params.limit');
    });
  });

  describe('sample', () => {
    /** The ids of the rows `random` draws from ids 1..20 with that seed (fixed: the same on every dialect). */
    const EXPECTED_SEED_42 = [2, 4, 6, 10, 12];

    let source: number;
    beforeAll(async () => {
      source = await input('smp', ['id:integer', 'label:string'], Array.from({ length: 20 }, (_, i) => `${i + 1},row ${i + 1}`));
    });
    const ids = (rows: Row[]) => rows.map((r) => r.id as number).sort((a, b) => a - b);

    it('head keeps the first rows', async () => {
      const rows = await result('sample', [source], { method: 'head', rows: 3 });
      expect(rows).toEqual([
        { id: 1, label: 'row 1' },
        { id: 2, label: 'row 2' },
        { id: 3, label: 'row 3' },
      ]);
      expect(ids(await result('sample', [source], { rows: 50 }))).toEqual(ids(await rowsOf(t, source)));
    });

    it('random draws the same rows for the same seed (on every dialect), others for another seed, every row when asked for more', async () => {
      const [first, again, other, more, unseeded] = await serially(
        [
          { method: 'random', rows: 5, seed: 42 },
          { method: 'random', rows: 5, seed: 42 },
          { method: 'random', rows: 5, seed: 7 },
          { method: 'random', rows: 100, seed: 42 },
          { method: 'random', rows: 5 },
        ],
        (params) => result('sample', [source], params),
      );
      expect(ids(first)).toEqual(EXPECTED_SEED_42);
      expect(ids(again)).toEqual(ids(first));
      expect(ids(other)).not.toEqual(ids(first));
      expect(ids(unseeded)).toHaveLength(5);
      expect(ids(more)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      for (const row of first) expect(row.label).toBe(`row ${row.id}`);
    });

    it('random draws are spread over the rows, not one stride of positions', async () => {
      // Over many seeds, every row is drawn at least once and no two seeds in ten draw the same set.
      const seeds = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
      const draws = await serially(seeds, async (seed) => ids(await result('sample', [source], { method: 'random', rows: 4, seed })));
      expect(new Set(draws.map((d) => d.join(','))).size).toBeGreaterThanOrEqual(9);
      expect(new Set(draws.flat()).size).toBeGreaterThanOrEqual(15);
    });
  });

  // ---- split ---------------------------------------------------------------------------------

  describe('split', () => {
    it('writes the matching rows to the first output and every other row, null conditions included, to the second', async () => {
      const source = await input('spl', ['id:integer', 'amount:number'], ['1,10', '2,3', '3,', '4,6']);
      const [match, rest] = await Promise.all([output('match'), output('rest')]);
      await succeed(await recipe('split', [source], [match, rest], { conditions: ['amount:gt:5'] }));
      expect(await rowsOf(t, match)).toEqual([
        { id: 1, amount: 10 },
        { id: 4, amount: 6 },
      ]);
      expect(await rowsOf(t, rest)).toEqual([
        { id: 2, amount: 3 },
        { id: 3, amount: null },
      ]);
      expect(await columnsOf(rest)).toEqual(['id:integer', 'amount:number']);
    });

    it('takes exactly two outputs (422 naming body.outputs)', async () => {
      const source = await input('spl', ['id:integer'], ['1']);
      const [a, b, c] = await Promise.all([output(), output(), output()]);
      expectProblem(await attempt('split', [source], [a], { conditions: ['id:eq:1'] }), 422, 'body.outputs', /exactly 2/);
      expectProblem(await attempt('split', [source], [a, b, c], { conditions: ['id:eq:1'] }), 422, 'body.outputs', /exactly 2/);
    });

    it('a failed run leaves both outputs with their rows and versions', async () => {
      const source = await input('spl', ['id:integer', 'amount:number'], ['1,10', '2,3']);
      const [match, rest] = await Promise.all([output('match'), output('rest')]);
      const id = await recipe('split', [source], [match, rest], { conditions: ['amount:gt:5'] });
      await succeed(id);
      const before = await Promise.all([dataset(match), dataset(rest), rowsOf(t, match), rowsOf(t, rest)]);
      // The input loses the column the condition names: the next run fails.
      const reload = await t.request('POST', `/api/datasets/${source}/data?mode=replace`, { body: 'id\n1\n2\n3\n', headers: { 'content-type': 'text/csv' } });
      expect(reload.status, reload.text).toBe(200);
      const failed = await runRecipe(t, id);
      expect(failed.status, JSON.stringify(failed)).toBe('failed');
      expect(await Promise.all([dataset(match), dataset(rest), rowsOf(t, match), rowsOf(t, rest)])).toEqual(before);
    });
  });

  // ---- what every run shares ------------------------------------------------------------------

  describe('every type', () => {
    it('adds one to the output version per successful run; the output takes the columns of a changed recipe; the schema is planned without running', async () => {
      const source = await input('gen', ['id:integer', 'name:string', 'amount:number'], ['1,a,1.5', '2,b,2.5']);
      const out = await output();
      const id = await recipe('select', [source], [out], { columns: [{ name: 'id' }, { name: 'name' }] });
      const start = (await dataset(out)).version;
      await succeed(id);
      expect((await dataset(out)).version).toBe(start + 1);
      await succeed(id);
      expect((await dataset(out)).version).toBe(start + 2);
      expect(await columnsOf(out)).toEqual(['id:integer', 'name:string']);

      const patched = await t.request('PATCH', `/api/pipeline/recipes/${id}`, { body: { params: { columns: [{ name: 'amount', as: 'total' }, { name: 'id', type: 'string' }] } } });
      expect(patched.status, patched.text).toBe(200);
      const schema = await t.request('GET', `/api/pipeline/recipes/${id}/schema`);
      expect(schema.status, schema.text).toBe(200);
      expect(schema.body.outputs).toEqual([
        expect.objectContaining({
          dataset_id: out,
          columns: [
            { name: 'total', type: 'number', pii: false },
            { name: 'id', type: 'string', pii: false },
          ],
        }),
      ]);
      // Asking the schema ran nothing.
      expect((await dataset(out)).version).toBe(start + 2);
      expect(await columnsOf(out)).toEqual(['id:integer', 'name:string']);

      await succeed(id);
      expect((await dataset(out)).version).toBe(start + 3);
      expect(await columnsOf(out)).toEqual(['total:number', 'id:string']);
      expect(await rowsOf(t, out)).toEqual([
        { total: 1.5, id: '1' },
        { total: 2.5, id: '2' },
      ]);
    });

    it('refuses a dataset name that is not an identifier, and carries hostile column names through filter, select and group', async () => {
      const refused = await t.request('POST', '/api/datasets', { body: { name: 'we"ird -- name', project_id: project, columns: [{ name: 'a', type: 'string' }] } });
      expect(refused.status, refused.text).toBe(400);

      const source = await input('We_Ird_Name', ['a"b:integer', 'c -- d:string', "e'f:number"], ['1,x,1', '2,y,2', '3,x,3']);
      const filtered = await result('filter', [source], { conditions: ['a"b:gte:2', "e'f:lt:3"] });
      const selected = await result('select', [source], { columns: [{ name: "e'f", as: 'g"h; --' }, { name: 'a"b', type: 'string' }] });
      const grouped = await result('group', [source], { keys: ['c -- d'], aggregations: [{ column: 'a"b', fn: 'sum', as: 'x"y' }, { column: "e'f", fn: 'max', as: "m'*/" }] });
      expect(filtered).toEqual([{ 'a"b': 2, 'c -- d': 'y', "e'f": 2 }]);
      expect(selected).toEqual([
        { 'g"h; --': 1, 'a"b': '1' },
        { 'g"h; --': 2, 'a"b': '2' },
        { 'g"h; --': 3, 'a"b': '3' },
      ]);
      expect(sorted(grouped, 'c -- d')).toEqual([
        { 'c -- d': 'x', 'x"y': 4, "m'*/": 3 },
        { 'c -- d': 'y', 'x"y': 2, "m'*/": 2 },
      ]);
    });

    it('answers 4xx, never 500, for huge params and a NUL byte in a condition', async () => {
      const source = await input('gen', ['id:integer', 'name:string'], ['1,a']);
      const out = await output();
      const huge = await attempt('select', [source], [out], { columns: Array.from({ length: 1001 }, () => ({ name: 'id' })) });
      expectProblem(huge, 400, 'body.params.columns');
      for (const condition of ['name:eq:a\u0000b', 'name:contains:\u0000', 'name:in:a,\u0000']) {
        const res = await attempt('filter', [source], [out], { conditions: [condition] });
        expect(res.status, `${JSON.stringify(condition)}: ${res.text}`).toBeGreaterThanOrEqual(400);
        expect(res.status, `${JSON.stringify(condition)}: ${res.text}`).toBeLessThan(500);
      }
      const nulName = await attempt('select', [source], [out], { columns: [{ name: 'id', as: 'a\u0000b' }] });
      expect(nulName.status, nulName.text).toBeGreaterThanOrEqual(400);
      expect(nulName.status, nulName.text).toBeLessThan(500);
    });

    it('a recipe over a PII column needs datasets.pii.read; its output columns computed from it are PII', async () => {
      const source = await input('pii', ['id:integer', 'email:string', 'city:string'], ['1,ada@example.test,Paris', '2,bob@example.test,Lyon'], { pii: ['email'] });
      const plain = await input('nopii', ['id:integer'], ['1']);
      const editor = await t.userToken('editor');
      const editorOut = await emptyDataset(t, project, unique('editor_out'), editor.token);

      // The editor may create recipes, just not over the PII column.
      const allowed = await attempt('select', [plain], [editorOut], { columns: [{ name: 'id' }] }, editor.token);
      expect(allowed.status, allowed.text).toBe(201);
      await t.request('DELETE', `/api/pipeline/recipes/${allowed.body.id}`).then((res) => expect(res.status, res.text).toBe(204));
      const forbidden = await attempt('select', [source], [editorOut], { columns: [{ name: 'email' }] }, editor.token);
      expect(forbidden.status, forbidden.text).toBe(403);
      expect(forbidden.body.detail).toMatch(/datasets\.pii\.read/);

      const out = await output('pii_out');
      await succeed(await recipe('select', [source], [out], { columns: [{ name: 'id' }, { name: 'email', as: 'contact' }, { name: 'city' }] }));
      expect((await dataset(out)).columns.map((c) => [c.name, c.pii])).toEqual([
        ['id', false],
        ['contact', true],
        ['city', false],
      ]);
      const grouped = await output('pii_grouped');
      await succeed(await recipe('group', [source], [grouped], { keys: ['city'], aggregations: [{ column: 'email', fn: 'count_distinct', as: 'people' }] }));
      expect((await dataset(grouped)).columns.map((c) => [c.name, c.pii])).toEqual([
        ['city', false],
        ['people', true],
      ]);
    });
  });
});
