import { sql, type RawBuilder } from 'kysely';
import { definePlugin, problems } from '../../kernel/plugin-api.ts';
import { recipeType, recipeTypes, type ColumnOrigin, type RecipeDataset } from '../pipeline/public.ts';
import { columnNameProblem, columnOf, outputName, tableOf, uniqueNames } from './columns.ts';

const JOIN_TYPES = ['inner', 'left', 'right', 'full'] as const;

interface JoinParams {
  type: (typeof JOIN_TYPES)[number];
  on: { left: string; right: string }[];
  columns?: { input: 'left' | 'right'; name: string; as?: string }[];
}

const SIDES = ['l', 'r'] as const;

/**
 * `join`: the rows of the first input (left) matched with those of the second (right) on equal
 * columns. Without `columns`, the output has every left column, then every right column that is
 * not a key of the same name; a right column whose name the left already has is prefixed with the
 * right dataset's name (a prefixed name too long for a column asks for `columns`). In a right or
 * full join, a key of the same name on both sides takes the value of whichever side has one.
 */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      recipeTypes,
      recipeType<JoinParams>({
        id: 'join',
        description: 'Joins two inputs (left, right) on equal columns: inner, left, right or full; columns picks and renames the output columns',
        params: {
          type: 'object',
          properties: {
            type: { enum: [...JOIN_TYPES], default: 'inner' },
            on: {
              type: 'array',
              minItems: 1,
              maxItems: 20,
              items: { type: 'object', properties: { left: { type: 'string', minLength: 1 }, right: { type: 'string', minLength: 1 } }, required: ['left', 'right'], additionalProperties: false },
            },
            columns: {
              type: 'array',
              minItems: 1,
              maxItems: 1000,
              items: {
                type: 'object',
                properties: { input: { enum: ['left', 'right'] }, name: { type: 'string', minLength: 1 }, as: { type: 'string', minLength: 1, maxLength: 63 } },
                required: ['input', 'name'],
                additionalProperties: false,
              },
            },
          },
          required: ['on'],
          additionalProperties: false,
        },
        inputs: { min: 2, max: 2 },
        plan: ({ params, inputs }) => {
          const [left, right] = inputs;
          const type = params.type ?? 'inner';
          const keys = params.on.map((pair, i) => ({ left: columnOf(left, pair.left, `on.${i}.left`), right: columnOf(right, pair.right, `on.${i}.right`) }));
          const ref = (side: 0 | 1, column: string) => sql.ref(`${SIDES[side]}.${column}`);
          const columns = params.columns ? chosenColumns(params.columns, inputs) : defaultColumns(left, right, keys, type);
          uniqueNames(columns, 'columns');
          const on = sql.join(
            keys.map((k) => sql`${ref(0, k.left.name)} = ${ref(1, k.right.name)}`),
            sql` and `,
          );
          const list = sql.join(columns.map((c) => sql`${c.expression(ref)} as ${sql.id(c.name)}`));
          const select = sql`select ${list} from ${tableOf(left)} as l ${sql.raw(type)} join ${tableOf(right)} as r on ${on}`;
          return [{ select, columns: columns.map(({ expression: _, ...column }) => column) }];
        },
      }),
    ),
});

type SideRef = (side: 0 | 1, column: string) => RawBuilder<unknown>;
interface JoinColumn {
  name: string;
  type: RecipeDataset['columns'][number]['type'];
  origin: ColumnOrigin;
  expression(ref: SideRef): RawBuilder<unknown>;
}

function chosenColumns(chosen: NonNullable<JoinParams['columns']>, inputs: RecipeDataset[]): JoinColumn[] {
  return chosen.map((c, i) => {
    const side = c.input === 'left' ? 0 : 1;
    const source = columnOf(inputs[side], c.name, `columns.${i}.name`);
    const name = c.as === undefined ? source.name : outputName(c.as, `columns.${i}.as`);
    return { name, type: source.type, origin: { from: [{ input: side, column: source.name }], transformation: name === source.name ? 'identity' : 'renamed' }, expression: (ref) => ref(side, source.name) };
  });
}

function defaultColumns(left: RecipeDataset, right: RecipeDataset, keys: { left: { name: string; type: string }; right: { name: string } }[], type: JoinParams['type']): JoinColumn[] {
  const sharedKeys = new Set(keys.filter((k) => k.left.name === k.right.name).map((k) => k.left.name));
  const merged = type === 'right' || type === 'full';
  const columns: JoinColumn[] = left.columns.map((c) =>
    merged && sharedKeys.has(c.name)
      ? { ...c, origin: { from: [{ input: 0, column: c.name }, { input: 1, column: c.name }], transformation: 'derived' }, expression: (ref) => sql`coalesce(${ref(0, c.name)}, ${ref(1, c.name)})` }
      : { ...c, origin: { from: [{ input: 0, column: c.name }], transformation: 'identity' }, expression: (ref) => ref(0, c.name) },
  );
  const taken = new Set(left.columns.map((c) => c.name.toLowerCase()));
  for (const c of right.columns) {
    if (sharedKeys.has(c.name)) continue;
    const name = taken.has(c.name.toLowerCase()) ? `${right.name}_${c.name}` : c.name;
    if (taken.has(name.toLowerCase())) throw problems.unprocessable(`the joined output would have two columns named "${name}": list the output columns in params.columns`, [{ path: 'body.params.columns', message: 'needed to name the columns' }]);
    const problem = columnNameProblem(name);
    if (problem) throw problems.unprocessable(`the joined output's column "${name}" (right column "${c.name}" prefixed) is refused (${problem}): list the output columns in params.columns`, [{ path: 'body.params.columns', message: 'needed to name the columns' }]);
    taken.add(name.toLowerCase());
    columns.push({ ...c, name, origin: { from: [{ input: 1, column: c.name }], transformation: name === c.name ? 'identity' : 'renamed' }, expression: (ref) => ref(1, c.name) });
  }
  return columns;
}
