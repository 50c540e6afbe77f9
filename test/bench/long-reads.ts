/**
 * Long reads (issue 13), run by test/bench/run.ts on each adapter: the latency of GET /healthz and
 * GET /api/me under a light load while a statistics profile and a CSV export of a 1,000,000-row,
 * 4-column dataset run over and over, against the same light load alone; and the time of that
 * profile through the API against one hand-written profiling query run directly on the database.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import type { DialectName } from '../harness/dialects.ts';
import { api, BENCH_COLUMNS, createFilledDataset, LONG_READ_ROWS, type BenchKernel } from './bench-dataset.ts';
import { pacedLoad, summarize } from './paced-load.ts';

export { LONG_READ_ROWS, type BenchKernel };

const LOAD_S = Number(process.env.BENCH_LONG_READ_LOAD_S ?? 10);
/** The light load: this many connections to each route, sending this many requests a second in all. */
const LOAD_CONNECTIONS = 2;
const LOAD_RATE_PER_S = 100;
const PROFILE_RUNS = 3;

/**
 * The direct profiling query: per column counts, distinct counts, extremes, and for numbers mean,
 * sample standard deviation and quartiles, as one would write it by hand for each database
 * (SQLite has no standard deviation aggregate: the one-pass formula; its percentile_disc takes
 * numbers only, so quartiles of numbers).
 */
function directQuery(dialect: DialectName, table: string): string {
  const parts = BENCH_COLUMNS.map(({ name, type }) => {
    const basics = `count(${name}), count(distinct ${name}), min(${name}), max(${name})`;
    const numeric = type === 'integer' || type === 'number';
    if (dialect === 'postgres') {
      const quartiles = `percentile_disc(array[0.25, 0.5, 0.75]) within group (order by ${name})`;
      return numeric ? `${basics}, avg(${name}::float8), stddev_samp(${name}::float8), ${quartiles}` : `${basics}, ${quartiles}`;
    }
    const stddev = `sqrt((sum(${name} * ${name}) - sum(${name}) * sum(${name}) / count(${name})) / (count(${name}) - 1))`;
    return numeric ? `${basics}, avg(${name}), ${stddev}, percentile_disc(${name}, 0.25), percentile_disc(${name}, 0.5), percentile_disc(${name}, 0.75)` : basics;
  });
  return `select ${parts.join(', ')} from ${table}`;
}

/** Runs `sqlText` on the database directly (not through the kernel); answers its best time of `runs`, in ms. */
async function directMs(dialect: DialectName, databaseUrl: string, sqlText: string, runs: number): Promise<number> {
  const times: number[] = [];
  if (dialect === 'sqlite') {
    const db = new Database(databaseUrl.slice('sqlite:'.length), { readonly: true });
    const statement = db.prepare(sqlText);
    for (let i = 0; i < runs; i += 1) {
      const started = performance.now();
      statement.all();
      times.push(performance.now() - started);
    }
    db.close();
  } else {
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    for (let i = 0; i < runs; i += 1) {
      const started = performance.now();
      await client.query(sqlText);
      times.push(performance.now() - started);
    }
    await client.end();
  }
  return Math.min(...times);
}

/** p50 and p99 of GET /healthz and GET /api/me under the light load, both at once, for LOAD_S seconds. */
async function lightLoad(base: string, token: string) {
  const run = (route: string, headers: Record<string, string> = {}) =>
    pacedLoad({ url: `${base}${route}`, headers, connections: LOAD_CONNECTIONS, ratePerS: LOAD_RATE_PER_S, seconds: LOAD_S }).then(summarize);
  const [healthz, me] = await Promise.all([run('/healthz'), run('/api/me', { authorization: `Bearer ${token}` })]);
  return { healthz, me };
}

const ratio = (value: number, baseline: number) => Math.round((value / baseline) * 100) / 100;

/**
 * The long-read figures on one adapter, against a kernel the caller started (over `databaseUrl`)
 * and its admin's token.
 */
export async function benchLongReads(dialect: DialectName, kernel: BenchKernel, token: string) {
  const { base, databaseUrl } = kernel;
  const project = await api(base, 'POST', '/api/projects', token, { key: 'LONGREADS', name: 'Long reads' });
  const dataset = await createFilledDataset(dialect, kernel, token, Number(project.id), 'long_reads');
  const { table } = dataset;

  /** A profile computed anew: a new version of the data (one more row) first, so the cache does not answer. */
  const freshProfile = async () => {
    await api(base, 'POST', `/api/datasets/${dataset.id}/rows`, token, [{ id: 0, amount: 0, country: 'FR', day: '2024-01-01' }]);
    const started = performance.now();
    const profile = await api(base, 'GET', `/api/statistics/datasets/${dataset.id}`, token);
    if (profile.cached) throw new Error('the profile came from the cache');
    return performance.now() - started;
  };
  const profileTimes: number[] = [];
  for (let i = 0; i < PROFILE_RUNS; i += 1) profileTimes.push(await freshProfile());
  const apiMs = Math.min(...profileTimes);
  const direct = await directMs(dialect, databaseUrl, directQuery(dialect, table), PROFILE_RUNS);

  const idle = await lightLoad(base, token);
  // The long work, again and again while the light load runs: a profile computed anew, and an export.
  let busy = true;
  let profiles = 0;
  let exports = 0;
  const loops = [
    (async () => {
      while (busy) await freshProfile().then(() => (profiles += 1));
    })(),
    (async () => {
      while (busy) await api(base, 'GET', `/api/datasets/${dataset.id}/export?format=csv`, token).then(() => (exports += 1));
    })(),
  ];
  const loaded = await lightLoad(base, token);
  busy = false;
  await Promise.all(loops);

  return {
    rows: LONG_READ_ROWS,
    columns: BENCH_COLUMNS.length,
    statistics_ms: Math.round(apiMs),
    direct_profiling_query_ms: Math.round(direct),
    ratio_direct_vs_statistics: ratio(direct, apiMs),
    idle,
    under_long_reads: { ...loaded, profiles_completed: profiles, exports_completed: exports },
    p99_ratio_under_load_vs_idle: { healthz: ratio(loaded.healthz.p99_ms, idle.healthz.p99_ms), me: ratio(loaded.me.p99_ms, idle.me.p99_ms) },
  };
}

export type LongReadFigures = Awaited<ReturnType<typeof benchLongReads>>;

/** The rows of the summary table for one adapter's figures. */
export function longReadRows(dialect: DialectName, figures: LongReadFigures): Record<string, { value: string | number }> {
  const { idle, under_long_reads: loaded } = figures;
  const latency = (route: 'healthz' | 'me') =>
    `p50 ${idle[route].p50_ms} → ${loaded[route].p50_ms} ms, p99 ${idle[route].p99_ms} → ${loaded[route].p99_ms} ms (×${figures.p99_ratio_under_load_vs_idle[route]})`;
  return {
    [`${dialect}: GET /healthz idle → during profile + export (target p99 ≤ 3× idle)`]: { value: latency('healthz') },
    [`${dialect}: GET /api/me idle → during profile + export (target p99 ≤ 3× idle)`]: { value: latency('me') },
    [`${dialect}: statistics ${figures.statistics_ms} ms vs direct query ${figures.direct_profiling_query_ms} ms (target ≥ 0.5)`]: { value: figures.ratio_direct_vs_statistics },
  };
}
