import { definePlugin } from '../../kernel/plugin-api.ts';
import { recipeType, recipeTypes, type ColumnOrigin } from '../pipeline/public.ts';
import { uniqueNames } from './columns.ts';
import { sqlColumnOrigins } from './sql-lineage.ts';

/**
 * `sql`: a read-only SELECT over the inputs, named by their dataset names, under the rules of
 * `/api/sql` (governed: only the recipe's inputs are readable, as its runner may read them). The
 * output's columns are the query's result columns, typed by the database, or as the input column
 * they read straight from.
 */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      recipeTypes,
      recipeType<{ query: string }>({
        id: 'sql',
        description: 'A read-only SELECT (WITH allowed) over the recipe inputs, named by their dataset names, with the rules of /api/sql',
        params: { type: 'object', properties: { query: { type: 'string', minLength: 1, maxLength: 100_000 } }, required: ['query'], additionalProperties: false },
        inputs: { min: 1 },
        plan: async ({ params, inputs, describe }) => {
          const described = await describe(params.query, 'body.params.query');
          uniqueNames(described, 'query');
          const origins = await sqlColumnOrigins(params.query, inputs, described);
          // A column read straight from an input keeps that column's type: SQLite reports no type
          // for what a subquery or a CTE passes on, and dates are text to it.
          const typeOf = (origin: ColumnOrigin) => (origin.from.length === 1 && ['identity', 'renamed'].includes(origin.transformation) ? inputs[origin.from[0].input]?.columns.find((c) => c.name === origin.from[0].column)?.type : undefined);
          return [{ select: params.query, columns: described.map((c, i) => ({ ...c, type: typeOf(origins[i]) ?? c.type, origin: origins[i] })) }];
        },
      }),
    ),
});
