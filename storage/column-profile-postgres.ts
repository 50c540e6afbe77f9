import { sql, type Kysely, type RawBuilder } from 'kysely';
import { alias, bucketOf, histogramEdges, histogramOf, PROFILE_TOP_VALUES, profileInSteps, type ColumnStatistics, type ProfiledColumn } from './column-profile.ts';
import type { DataColumn } from './data-tables.ts';

type Summary = Pick<ColumnStatistics, 'count' | 'distinct' | 'min' | 'max' | 'mean' | 'stddev' | 'quartiles'>;

/**
 * Counts, distinct values, range, mean, sample standard deviation and nearest-rank quartiles of
 * the column, in one statement: Postgres' own aggregates. `percentile_disc` is the nearest rank
 * (one call for the three, so one sort; its elements taken apart keep their type), and
 * `stddev_samp` does not cancel when values are large next to their spread. One statement per
 * column: distinct counts and quartiles sort the column, and the columns' statements run at once.
 */
async function summarize(db: Kysely<any>, source: RawBuilder<unknown>, group: ProfiledColumn[]): Promise<Summary[]> {
  const selections = group.flatMap(({ ref, comparable, asDouble, ordered, numeric }, n) => [
    sql`count(${ref}) as ${alias(n, 'count')}`,
    sql`count(distinct ${comparable}) as ${alias(n, 'distinct')}`,
    ...(ordered
      ? [
          sql`min(${ref}) as ${alias(n, 'min')}`,
          sql`max(${ref}) as ${alias(n, 'max')}`,
          ...(['p25', 'p50', 'p75'] as const).map((p, i) => sql`(percentile_disc(array[0.25, 0.5, 0.75]) within group (order by ${ref}))[${sql.lit(i + 1)}] as ${alias(n, p)}`),
        ]
      : []),
    ...(numeric ? [sql`avg(${asDouble}) as ${alias(n, 'mean')}`, sql`stddev_samp(${asDouble}) as ${alias(n, 'stddev')}`] : []),
  ]);
  const row = (await sql<Record<string, unknown>>`select ${sql.join(selections)} from ${source}`.execute(db)).rows[0];
  return group.map(({ ordered, numeric }, n) => {
    const value = (what: string) => row[`c${n}_${what}`] ?? null;
    const count = Number(value('count'));
    return {
      count,
      distinct: Number(value('distinct')),
      min: value('min'),
      max: value('max'),
      mean: numeric && count > 0 ? Number(value('mean')) : null,
      stddev: numeric && count > 1 ? Number(value('stddev')) : null,
      quartiles: ordered && count > 0 ? { p25: value('p25'), p50: value('p50'), p75: value('p75') } : null,
    };
  });
}

/**
 * The most frequent values. When every value is distinct each is there once, and the first by
 * value are the answer: read by a top-N sort, not by counting a million groups.
 */
async function topValues(db: Kysely<any>, source: RawBuilder<unknown>, { ref, comparable }: ProfiledColumn, summary: Summary): Promise<ColumnStatistics['topValues']> {
  if (summary.count === 0) return [];
  if (summary.distinct === summary.count) {
    const { rows } = await sql<{ v: unknown }>`select ${comparable} as v from ${source} where ${ref} is not null order by ${comparable} limit ${PROFILE_TOP_VALUES}`.execute(db);
    return rows.map((r) => ({ value: r.v, count: 1 }));
  }
  const { rows } = await sql<{ v: unknown; c: unknown }>`select ${comparable} as v, count(*) as c from ${source} where ${ref} is not null
    group by ${comparable} order by count(*) desc, ${comparable} limit ${PROFILE_TOP_VALUES}`.execute(db);
  return rows.map((r) => ({ value: r.v, count: Number(r.c) }));
}

async function histogram(db: Kysely<any>, source: RawBuilder<unknown>, { ref, asDouble, numeric }: ProfiledColumn, summary: Summary): Promise<ColumnStatistics['histogram']> {
  if (!numeric || summary.count === 0) return null;
  const edges = histogramEdges(Number(summary.min), Number(summary.max));
  const { rows } = await sql<{ b: unknown; c: unknown }>`select ${bucketOf(asDouble, edges)} as b, count(*) as c from ${source} where ${ref} is not null group by 1`.execute(db);
  return histogramOf(edges, new Map(rows.map((r) => [Number(r.b), Number(r.c)])));
}

/** `DataTables.profile` on Postgres: per column, one statement summarizes it, then one its top values and one its histogram. */
export const profilePostgres = (db: Kysely<any>, source: RawBuilder<unknown>, columns: DataColumn[]): Promise<ColumnStatistics[]> =>
  profileInSteps(
    columns,
    1,
    (group) => summarize(db, source, group),
    async (column, summary) => {
      const [top, buckets] = await Promise.all([topValues(db, source, column, summary), histogram(db, source, column, summary)]);
      return { topValues: top, histogram: buckets };
    },
  );
