import { sql, type Kysely, type RawBuilder } from 'kysely';
import { alias, bucketOf, histogramEdges, histogramOf, PROFILE_TOP_VALUES, profileInSteps, quartileRanks, type ColumnStatistics, type ProfiledColumn } from './column-profile.ts';
import type { DataColumn } from './data-tables.ts';

type Summary = Pick<ColumnStatistics, 'count' | 'min' | 'max' | 'mean'>;

/** Columns summarized by one statement (these aggregates are cheap: one read of the rows serves many). */
const COLUMNS_PER_STATEMENT = 50;

/** Counts, range and mean of every column of the group, in one statement (one read of the rows). */
async function summarize(db: Kysely<any>, source: RawBuilder<unknown>, group: ProfiledColumn[]): Promise<Summary[]> {
  const selections = group.flatMap(({ ref, asDouble, ordered, numeric }, n) => [
    sql`count(${ref}) as ${alias(n, 'count')}`,
    ...(ordered ? [sql`min(${ref}) as ${alias(n, 'min')}`, sql`max(${ref}) as ${alias(n, 'max')}`] : []),
    ...(numeric ? [sql`avg(${asDouble}) as ${alias(n, 'mean')}`] : []),
  ]);
  const row = (await sql<Record<string, unknown>>`select ${sql.join(selections)} from ${source}`.execute(db)).rows[0];
  return group.map((_, n) => {
    const value = (what: string) => row[`c${n}_${what}`] ?? null;
    const mean = value('mean');
    return { count: Number(value('count')), min: value('min'), max: value('max'), mean: mean === null ? null : Number(mean) };
  });
}

interface Row {
  kind: 'summary' | 'top' | 'bucket';
  v: unknown;
  v2: unknown;
  v3: unknown;
  c: number | null;
  x: number | null;
}

/**
 * The rest of a column's profile from one read of its values: SQLite has neither a standard
 * deviation nor a nearest-rank quartile aggregate. The rows are grouped by value once (`g`: each
 * distinct value and how often it occurs, sorted by value) and everything else comes from those
 * groups: their number (distinct values), the most frequent, the quartiles (the first value whose
 * running count reaches each rank), the sum of squared deviations from the mean (a second pass
 * over the groups; Σx² − n·mean² would cancel when values are large next to their spread), and
 * the histogram's buckets.
 */
async function fromGroups(db: Kysely<any>, source: RawBuilder<unknown>, { ref, comparable, ordered, numeric }: ProfiledColumn, summary: Summary) {
  const value = sql`cast(v as double precision)`;
  const [r1, r2, r3] = quartileRanks(summary.count);
  const atRank = (rank: number) => (ordered ? sql`min(case when cum >= ${rank} then v end)` : sql`null`);
  const squares = numeric ? sql`sum(c * (${value} - ${summary.mean}) * (${value} - ${summary.mean}))` : sql`null`;
  const groups = ordered ? sql`(select v, c, sum(c) over (order by v rows between unbounded preceding and current row) as cum from g) as running` : sql`g`;
  const edges = histogramEdges(Number(summary.min), Number(summary.max));
  const buckets = numeric
    ? sql`union all select 'bucket', null, null, null, sum(c), b from (select ${bucketOf(value, edges)} as b, c from g) as bucketed group by b`
    : sql``;
  const { rows } = await sql<Row>`with g as materialized (select ${comparable} as v, count(*) as c from ${source} where ${ref} is not null group by ${comparable})
    select 'summary' as kind, ${atRank(r1)} as v, ${atRank(r2)} as v2, ${atRank(r3)} as v3, count(*) as c, ${squares} as x from ${groups}
    union all select * from (select 'top', v, null, null, c, null from g order by c desc, v limit ${PROFILE_TOP_VALUES})
    ${buckets}`.execute(db);
  const head = rows.find((r) => r.kind === 'summary')!;
  return {
    distinct: Number(head.c),
    stddev: numeric && summary.count > 1 ? Math.sqrt(Number(head.x) / (summary.count - 1)) : null,
    quartiles: ordered ? { p25: head.v, p50: head.v2, p75: head.v3 } : null,
    topValues: rows.filter((r) => r.kind === 'top').map((r) => ({ value: r.v, count: Number(r.c) })),
    histogram: numeric ? histogramOf(edges, new Map(rows.filter((r) => r.kind === 'bucket').map((r) => [Number(r.x), Number(r.c)]))) : null,
  };
}

const NO_VALUES = { distinct: 0, stddev: null, quartiles: null, topValues: [], histogram: null };

/** `DataTables.profile` on SQLite: one statement summarizes the columns, then one per column reads its values once. */
export const profileSqlite = (db: Kysely<any>, source: RawBuilder<unknown>, columns: DataColumn[]): Promise<ColumnStatistics[]> =>
  profileInSteps(
    columns,
    COLUMNS_PER_STATEMENT,
    (group) => summarize(db, source, group),
    async (column, summary) => (summary.count === 0 ? NO_VALUES : fromGroups(db, source, column, summary)),
  );
