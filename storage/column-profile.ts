import { sql, type RawBuilder } from 'kysely';
import type { DataColumn, DataColumnType } from './data-tables.ts';

export const PROFILE_TOP_VALUES = 10;
const PROFILE_HISTOGRAM_BUCKETS = 10;
const NUMERIC: DataColumnType[] = ['integer', 'number'];
const ORDERED: DataColumnType[] = ['integer', 'number', 'date', 'timestamp', 'string'];

/** The profile of one column as the database computed it: values as stored (decode them). */
export interface ColumnStatistics {
  /** Values that are not null. */
  count: number;
  distinct: number;
  /** Of ordered types (numbers, dates, timestamps, strings), null otherwise. */
  min: unknown;
  max: unknown;
  /** Of numbers: the mean, and the sample standard deviation (null below two values). */
  mean: number | null;
  stddev: number | null;
  /** Nearest-rank quartiles of ordered types: the values at ranks ⌈n/4⌉, ⌈n/2⌉, ⌈3n/4⌉ of the n values. */
  quartiles: { p25: unknown; p50: unknown; p75: unknown } | null;
  /** The most frequent values, most frequent first, ties by value; a JSON value as its text. */
  topValues: { value: unknown; count: number }[];
  /** Of numbers: equal-width buckets from min to max (one bucket when every value is the same). */
  histogram: { from: number; to: number; count: number }[] | null;
}

/** How a column is profiled: which statistics its type has, and the expressions computing them. */
export interface ProfiledColumn {
  column: DataColumn;
  ref: RawBuilder<unknown>;
  /** What distinct values and top values compare: JSON as its text, anything else as itself. */
  comparable: RawBuilder<unknown>;
  /** The value as a double (numbers only): means and spreads in floating point, whatever the storage. */
  asDouble: RawBuilder<unknown>;
  numeric: boolean;
  ordered: boolean;
}

function profiledColumn(column: DataColumn): ProfiledColumn {
  const ref = sql.id(column.name);
  return {
    column,
    ref,
    comparable: column.type === 'json' ? sql`cast(${ref} as text)` : ref,
    asDouble: sql`cast(${ref} as double precision)`,
    numeric: NUMERIC.includes(column.type),
    ordered: ORDERED.includes(column.type),
  };
}

/** The nearest ranks (1-based) of the quartiles among `count` values. */
export const quartileRanks = (count: number) => [0.25, 0.5, 0.75].map((fraction) => Math.max(1, Math.ceil(fraction * count)));

/** Digits after the point of the shortest decimal that reads back as `x` (0.25 → 2, 1e-7 → 7). */
function decimals(x: number): number {
  const [mantissa, exponent = '0'] = String(Math.abs(x)).split('e');
  return Math.max(0, (mantissa.split('.')[1]?.length ?? 0) - Number(exponent));
}

/**
 * The edges of equal-width buckets from `min` to `max` (one bucket when they are equal). With `min`
 * and `max` of at most d decimals, every true edge min + i·(max − min)/10 has at most d + 1: the
 * edges are rounded to that, so floating point's noise (0.1 · 3 = 0.30000000000000004) is gone.
 */
export function histogramEdges(min: number, max: number): number[] {
  if (!(max > min)) return [min, max];
  const digits = Math.min(100, Math.max(decimals(min), decimals(max)) + 1);
  const width = (max - min) / PROFILE_HISTOGRAM_BUCKETS;
  return Array.from({ length: PROFILE_HISTOGRAM_BUCKETS + 1 }, (_, i) => (i === PROFILE_HISTOGRAM_BUCKETS ? max : Number((min + i * width).toFixed(digits))));
}

/**
 * The histogram bucket (0 … buckets − 1) of the double `value`: the last edge at or below it (`max`
 * in the last bucket). Compared with the rounded edges themselves, so a value on an edge (0.3)
 * counts in the bucket the answer says starts there, which dividing by the width would miss.
 */
export function bucketOf(value: RawBuilder<unknown>, edges: number[]): RawBuilder<number> {
  const inner = edges.slice(1, -1);
  if (inner.length === 0) return sql<number>`0`;
  const cases = inner.map((edge, i) => sql`when ${value} >= ${edge} then ${i + 1}`).reverse();
  return sql<number>`case ${sql.join(cases, sql` `)} else 0 end`;
}

/** The histogram from its edges and the count of each bucket `bucketOf` numbered. */
export function histogramOf(edges: number[], counts: Map<number, number>): NonNullable<ColumnStatistics['histogram']> {
  return edges.slice(1).map((to, i) => ({ from: edges[i], to, count: counts.get(i) ?? 0 }));
}

/**
 * The profile of each column in two steps: `summarize` computes what one statement can for a group
 * of at most `perStatement` columns, then `complete` the rest of each column's statistics from its
 * summary; the groups at once, then the columns at once (the long reads' turns bound how many
 * statements run: a profile uses the organization's share of the database's cores).
 */
export async function profileInSteps<S extends Partial<ColumnStatistics>>(
  columns: DataColumn[],
  perStatement: number,
  summarize: (group: ProfiledColumn[]) => Promise<S[]>,
  complete: (column: ProfiledColumn, summary: S) => Promise<Omit<ColumnStatistics, keyof S>>,
): Promise<ColumnStatistics[]> {
  const profiled = columns.map(profiledColumn);
  const groups: ProfiledColumn[][] = [];
  for (let i = 0; i < profiled.length; i += perStatement) groups.push(profiled.slice(i, i + perStatement));
  const summaries = (await Promise.all(groups.map(summarize))).flat();
  return Promise.all(profiled.map(async (column, i) => ({ ...summaries[i], ...(await complete(column, summaries[i])) }) as ColumnStatistics));
}

/** Name of the `n`th aggregate a summary statement selects. */
export const alias = (n: number, what: string) => sql.id(`c${n}_${what}`);
