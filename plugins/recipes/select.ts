import { sql, type RawBuilder } from 'kysely';
import { definePlugin } from '../../kernel/plugin-api.ts';
import { DATA_COLUMN_TYPES, type DataColumnType } from '../../storage/index.ts';
import { recipeType, recipeTypes, type ColumnOrigin } from '../pipeline/public.ts';
import { columnOf, outputName, tableOf, uniqueNames } from './columns.ts';

interface SelectParams {
  columns: { name: string; as?: string; type?: DataColumnType }[];
}

/**
 * A number rounded to the nearest integer, halves away from zero, as a number: converting it to
 * an integer then gives the same value on both adapters (a plain cast truncates on SQLite and
 * rounds halves to even on Postgres).
 */
const rounded = (x: RawBuilder<unknown>): RawBuilder<unknown> => sql`(case when ${x} < 0 then -floor(0.5 - ${x}) else floor(${x} + 0.5) end)`;

/** `select`: keeps the columns named, in that order, each renamed (`as`) or converted (`type`) if asked (a number to an integer: rounded, halves away from zero). */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      recipeTypes,
      recipeType<SelectParams>({
        id: 'select',
        description: 'Keeps, renames (as) and converts (type) columns, in the order given',
        params: {
          type: 'object',
          properties: {
            columns: {
              type: 'array',
              minItems: 1,
              maxItems: 1000,
              items: {
                type: 'object',
                properties: { name: { type: 'string', minLength: 1 }, as: { type: 'string', minLength: 1, maxLength: 63 }, type: { enum: [...DATA_COLUMN_TYPES] } },
                required: ['name'],
                additionalProperties: false,
              },
            },
          },
          required: ['columns'],
          additionalProperties: false,
        },
        inputs: { min: 1, max: 1 },
        plan: ({ params, inputs: [input], cast }) => {
          const columns = params.columns.map((wanted, i) => {
            const source = columnOf(input, wanted.name, `columns.${i}.name`);
            const type = wanted.type ?? source.type;
            const name = wanted.as === undefined ? source.name : outputName(wanted.as, `columns.${i}.as`);
            const converted = type !== source.type;
            const transformation: ColumnOrigin['transformation'] = converted ? 'cast' : name !== source.name ? 'renamed' : 'identity';
            const expression = !converted ? sql.id(source.name) : source.type === 'number' && type === 'integer' ? cast(rounded(sql.id(source.name)), type) : cast(sql.id(source.name), type);
            return { name, type, origin: { from: [{ input: 0, column: source.name }], transformation }, expression };
          });
          uniqueNames(columns, 'columns');
          const list = sql.join(columns.map((c) => sql`${c.expression} as ${sql.id(c.name)}`));
          return [{ select: sql`select ${list} from ${tableOf(input)}`, columns: columns.map(({ expression: _, ...column }) => column) }];
        },
      }),
    ),
});
