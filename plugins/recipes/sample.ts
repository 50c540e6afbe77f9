import { sql, type RawBuilder } from 'kysely';
import { definePlugin } from '../../kernel/plugin-api.ts';
import { recipeType, recipeTypes } from '../pipeline/public.ts';
import { passThrough, selectList, tableOf } from './columns.ts';

interface SampleParams {
  method: 'head' | 'random';
  rows: number;
  seed?: number;
}

/** Column names no dataset column has (control characters are refused in column names). */
const POSITION = '\u0001position';
const HASH = '\u0001hash';

/** Hashes are kept modulo 2^31, multiplied by constants below 2^31: every product fits in 63 bits. */
const MODULUS = 2_147_483_648n;
const MULTIPLIER = 73_244_475n;

/** One round of the hash in JavaScript, as the SQL below computes it: x xor (x >> 16), times MULTIPLIER. */
const round = (x: bigint) => ((x ^ (x >> 16n)) * MULTIPLIER) % MODULUS;
/** The seed, mixed, added to each row's position (so that nearby seeds draw unrelated samples). */
const seedOffset = (seed: number) => round(round(BigInt(seed) % MODULUS));

/** `a xor b` for non-negative integers with operators both dialects have (SQLite has no xor), fully parenthesized (precedences differ). */
const xor = (a: RawBuilder<unknown>, b: RawBuilder<unknown>) => sql`((${a} | ${b}) - (${a} & ${b}))`;
/** One round of the hash over a column: x xor (x >> 16), times MULTIPLIER, modulo 2^31. */
const roundOf = (x: RawBuilder<unknown>) => sql`((${xor(x, sql`(${x} >> 16)`)} * ${sql.lit(Number(MULTIPLIER))}) % ${sql.lit(Number(MODULUS))})`;

/**
 * `sample`: the first `rows` rows, or `rows` rows drawn at random. The draw is a hash of each row's
 * position and the seed (xor-shift-multiply rounds, a non-linear mix: a linear one draws rows at one
 * stride and many seeds alike), computed in the database in 64-bit integers on both adapters: the
 * same seed over the same rows draws the same sample on either, with no random() state to set.
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
          const hash = sql.id(HASH);
          // Each round in a query of its own: a round names its argument four times, nested rounds would grow the text fourfold each.
          const numbered = sql`select ${list}, row_number() over () as ${position} from ${tableOf(input)}`;
          const first = sql`select ${list}, ${position}, ((${position} + ${sql.lit(Number(seedOffset(params.seed ?? 0)))}) % ${sql.lit(Number(MODULUS))}) as ${hash} from (${numbered}) as numbered`;
          const second = sql`select ${list}, ${position}, ${roundOf(hash)} as ${hash} from (${first}) as first_round`;
          const third = sql`select ${list}, ${position}, ${roundOf(hash)} as ${hash} from (${second}) as second_round`;
          const draw = xor(hash, sql`(${hash} >> 16)`);
          return [{ select: sql`select ${list} from (${third}) as hashed order by ${draw}, ${position} limit ${sql.lit(params.rows)}`, columns }];
        },
      }),
    ),
});
