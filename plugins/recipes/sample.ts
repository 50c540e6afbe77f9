import { sql } from 'kysely';
import { definePlugin } from '../../kernel/plugin-api.ts';
import { recipeType, recipeTypes } from '../pipeline/public.ts';
import { passThrough, selectList, tableOf } from './columns.ts';

interface SampleParams {
  method: 'head' | 'random';
  rows: number;
  seed?: number;
}

/** A column name no dataset column has (control characters are refused in column names). */
const POSITION = '\u0001position';

/**
 * `sample`: the first `rows` rows, or `rows` rows drawn at random. The draw is a hash of each row's
 * position and the seed, computed in the database in 64-bit integers on both adapters: the same
 * seed over the same rows draws the same sample, with no random() state to set.
 */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      recipeTypes,
      recipeType<SampleParams>({
        id: 'sample',
        description: 'Keeps `rows` rows: the first ones (head) or drawn at random (random; the same seed draws the same rows)',
        params: {
          type: 'object',
          properties: { method: { enum: ['head', 'random'], default: 'head' }, rows: { type: 'integer', minimum: 1, maximum: 1_000_000_000 }, seed: { type: 'integer', minimum: 0, maximum: 2_147_483_647, default: 0 } },
          required: ['rows'],
          additionalProperties: false,
        },
        inputs: { min: 1, max: 1 },
        plan: ({ params, inputs: [input] }) => {
          const columns = passThrough(input, 0);
          const list = selectList(columns);
          if (params.method !== 'random') return [{ select: sql`select ${list} from ${tableOf(input)} limit ${sql.lit(params.rows)}`, columns }];
          const position = sql.id(POSITION);
          // Two rounds of a multiplicative hash modulo 2^31, then the halves swapped: products stay below 2^63.
          const first = sql`((${position} * 1103515245 + ${sql.lit(params.seed ?? 0)}) % 2147483648)`;
          const second = sql`((${first} * 69069 + 12345) % 2147483648)`;
          const draw = sql`((${second} % 65536) * 32768 + ${second} / 65536)`;
          const numbered = sql`select ${list}, row_number() over () as ${position} from ${tableOf(input)}`;
          return [{ select: sql`select ${list} from (${numbered}) as numbered order by ${draw}, ${position} limit ${sql.lit(params.rows)}`, columns }];
        },
      }),
    ),
});
