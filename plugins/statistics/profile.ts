import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { DataColumnType } from '../../storage/index.ts';

export interface ColumnProfile {
  name: string;
  type: DataColumnType;
  count: number;
  nulls: number;
  distinct: number;
  min: unknown;
  max: unknown;
  mean: number | null;
  stddev: number | null;
  quantiles: { p25: unknown; p50: unknown; p75: unknown } | null;
  top_values: { value: unknown; count: number }[];
  histogram: { from: number; to: number; count: number }[] | null;
}

const NUMERIC: DataColumnType[] = ['integer', 'number'];
const ORDERED: DataColumnType[] = ['integer', 'number', 'date', 'timestamp', 'string'];
export const HISTOGRAM_BUCKETS = 10;
export const TOP_VALUES = 10;

interface ProfileInput {
  db: Kysely<any>;
  table: RawBuilder<unknown>;
  column: { name: string; type: DataColumnType };
  rowCount: number;
  decode: (type: DataColumnType, value: unknown) => unknown;
}

/**
 * The sample standard deviation of `value`, in a second pass over the same rows: the sum of squared
 * deviations from the mean the first pass computed. The one-pass Σx² − n·mean² cancels
 * catastrophically when values are large next to their spread (around 1e9 it keeps no digit), and
 * SQLite has no stddev aggregate to lean on.
 */
async function sampleStddev(db: Kysely<any>, table: RawBuilder<unknown>, value: RawBuilder<unknown>, mean: number, count: number): Promise<number> {
  const deviation = sql`(${value} - ${mean})`;
  const row = (await sql<{ squares: unknown }>`select sum(${deviation} * ${deviation}) as squares from ${table}`.execute(db)).rows[0];
  return Math.sqrt(Number(row.squares) / (count - 1));
}

/**
 * Profiles one column with aggregate queries run in the database (nothing is read row by row):
 * counts, distinct values, range, mean and sample standard deviation, nearest-rank quartiles,
 * the most frequent values and an equal-width histogram for numbers.
 */
export async function profileColumn({ db, table, column, rowCount, decode }: ProfileInput): Promise<ColumnProfile> {
  const ref = sql.id(column.name);
  const numeric = NUMERIC.includes(column.type);
  const ordered = ORDERED.includes(column.type);
  // JSON values are compared as their text; everything else as itself.
  const comparable = column.type === 'json' ? sql`cast(${ref} as text)` : ref;
  const asDouble = sql`cast(${ref} as double precision)`;

  const basics = (
    await sql<Record<string, unknown>>`select count(${ref}) as count, count(distinct ${comparable}) as distinct_count,
      ${ordered ? sql`min(${ref})` : sql`null`} as min, ${ordered ? sql`max(${ref})` : sql`null`} as max,
      ${numeric ? sql`avg(${asDouble})` : sql`null`} as mean
      from ${table}`.execute(db)
  ).rows[0];
  const count = Number(basics.count);
  const mean = basics.mean === null ? null : Number(basics.mean);
  const stddev = numeric && count > 1 && mean !== null ? await sampleStddev(db, table, asDouble, mean, count) : null;

  let quantiles: ColumnProfile['quantiles'] = null;
  if (ordered && count > 0) {
    const at = async (fraction: number) => {
      const offset = Math.max(0, Math.ceil(fraction * count) - 1); // nearest rank
      const row = (await sql<{ v: unknown }>`select ${ref} as v from ${table} where ${ref} is not null order by ${ref} limit 1 offset ${offset}`.execute(db)).rows[0];
      return decode(column.type, row?.v ?? null);
    };
    quantiles = { p25: await at(0.25), p50: await at(0.5), p75: await at(0.75) };
  }

  const top = await sql<{ v: unknown; c: unknown }>`select ${comparable} as v, count(*) as c from ${table} where ${ref} is not null
    group by ${comparable} order by count(*) desc, ${comparable} limit ${TOP_VALUES}`.execute(db);
  const topValues = top.rows.map((r) => ({ value: column.type === 'json' ? JSON.parse(String(r.v)) : decode(column.type, r.v), count: Number(r.c) }));

  let histogram: ColumnProfile['histogram'] = null;
  const min = basics.min === null ? null : Number(basics.min);
  const max = basics.max === null ? null : Number(basics.max);
  if (numeric && min !== null && max !== null) {
    const width = max > min ? (max - min) / HISTOGRAM_BUCKETS : 1;
    const buckets = await sql<{ b: unknown; c: unknown }>`select case when ${asDouble} >= ${max} then ${HISTOGRAM_BUCKETS - 1}
        else floor((${asDouble} - ${min}) / ${width}) end as b, count(*) as c
      from ${table} where ${ref} is not null group by 1 order by 1`.execute(db);
    const counts = new Map(buckets.rows.map((r) => [Number(r.b), Number(r.c)]));
    const size = max > min ? HISTOGRAM_BUCKETS : 1;
    histogram = Array.from({ length: size }, (_, i) => ({ from: min + i * width, to: max > min ? min + (i + 1) * width : max, count: counts.get(i) ?? 0 }));
  }

  return {
    name: column.name,
    type: column.type,
    count,
    nulls: rowCount - count,
    distinct: Number(basics.distinct_count),
    min: ordered ? decode(column.type, basics.min) : null,
    max: ordered ? decode(column.type, basics.max) : null,
    mean,
    stddev,
    quantiles,
    top_values: topValues,
    histogram,
  };
}
