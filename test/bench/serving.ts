/**
 * Serving (issue 17), run by test/bench/run.ts on each adapter against a kernel process it started
 * and a bare Koa hello-world (the baseline), each round measuring the baseline then every case:
 * 1. a single-key lookup through the service path (GET /api/service/{key}/{endpoint}?id=…) over
 *    the 1,000,000-row dataset, its answer cached (one hot key) and not cached (a random key per
 *    request), against the baseline's throughput (target: cached ≥ 0.6), with p50 and p99;
 * 2. the same indexed query run directly on the database by the driver, as many at once;
 * 3. a batch of 100 random keys in one POST (keys looked up per second);
 * 4. a `model` endpoint serving a random forest of 50 trees: predictions per second, 100 rows per call.
 */
import autocannon from 'autocannon';
import Database from 'better-sqlite3';
import pg from 'pg';
import type { DialectName } from '../harness/dialects.ts';
import { api, createFilledDataset, LONG_READ_ROWS, type BenchKernel } from './bench-dataset.ts';

const DURATION_S = Number(process.env.BENCH_SERVING_DURATION_S ?? 5);
const ROUNDS = Number(process.env.BENCH_SERVING_ROUNDS ?? 5);
const CONNECTIONS = 16;
const BATCH_KEYS = 100;
const MODEL_ROWS_PER_CALL = 100;
/** Rows the forest is trained on (a sample of the same columns: training itself is not measured here). */
const TRAINING_ROWS = 5_000;
const HOT_ID = 424_242;

const ALL_CASES = ['lookup_cached', 'lookup_uncached', 'batch_of_100_uncached', 'model_100_rows'] as const;
type CaseName = (typeof ALL_CASES)[number];
/** BENCH_SERVING_CASES=lookup_cached,… measures only those (a profile of one case, say); all by default. */
const CASES = process.env.BENCH_SERVING_CASES ? ALL_CASES.filter((name) => process.env.BENCH_SERVING_CASES!.split(',').includes(name)) : ALL_CASES;
interface CaseFigures {
  requests_per_s: number;
  p50_ms: number;
  p99_ms: number;
  ratio_vs_koa: number;
  ratios_of_rounds: number[];
}

const randomId = () => 1 + Math.floor(Math.random() * LONG_READ_ROWS);
const ratio = (value: number, baseline: number) => Math.round((value / baseline) * 100) / 100;

interface Load {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** A new path or body per request (a random key). */
  request?: () => { path?: string; body?: string };
}

async function measure({ url, method = 'GET', headers = {}, request }: Load, duration = DURATION_S) {
  const requests = request ? [{ method, setupRequest: (req: Record<string, unknown>) => ({ ...req, ...request() }) }] : undefined;
  const result = await autocannon({ url, method, headers: { 'content-type': 'application/json', ...headers }, connections: CONNECTIONS, duration, requests: requests as never });
  if (result.non2xx || result.errors) throw new Error(`${method} ${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  return { requests_per_s: Math.round(result.requests.average), p50_ms: result.latency.p50, p99_ms: result.latency.p99 };
}

/** The indexed lookup run directly, CONNECTIONS at a time (one connection on SQLite, which is synchronous): queries per second. */
async function directLookups(dialect: DialectName, databaseUrl: string, table: string): Promise<number> {
  const text = `select id, amount, country, day from ${table} where id = `;
  const until = performance.now() + DURATION_S * 1000;
  let done = 0;
  if (dialect === 'sqlite') {
    const db = new Database(databaseUrl.slice('sqlite:'.length), { readonly: true });
    const statement = db.prepare(`${text}?`);
    while (performance.now() < until) {
      for (let i = 0; i < 1000; i += 1) statement.all(randomId());
      done += 1000;
    }
    db.close();
  } else {
    const clients = await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      return client;
    }));
    await Promise.all(clients.map(async (client) => {
      while (performance.now() < until) {
        await client.query({ name: 'lookup', text: `${text}$1`, values: [randomId()] });
        done += 1;
      }
    }));
    await Promise.all(clients.map((client) => client.end()));
  }
  return Math.round(done / DURATION_S);
}

/** The serving figures on one adapter: a kernel the caller started, its admin's token, and the baseline's URL. */
export async function benchServing(dialect: DialectName, kernel: BenchKernel, token: string, koaUrl: string) {
  const { base } = kernel;
  const call = (method: string, route: string, body?: unknown) => api(base, method, route, token, body);
  const project = await call('POST', '/api/projects', { key: 'SERVING', name: 'Serving' });
  const big = await createFilledDataset(dialect, kernel, token, Number(project.id), 'serving_rows');
  const sample = await createFilledDataset(dialect, kernel, token, Number(project.id), 'training_rows', TRAINING_ROWS);

  const trained = await call('POST', '/api/registry/models', {
    project_id: project.id,
    name: 'forest',
    dataset_id: sample.id,
    target: 'amount',
    features: ['id', 'country'],
    task: 'regression',
    algorithm: 'random_forest',
    params: { n_estimators: 50 },
  });
  for (;;) {
    const { items } = await call('GET', `/api/registry/models/${trained.model.id}/versions`);
    const version = items.find((v: { version: number }) => v.version === trained.version.version);
    if (version.status === 'ready') break;
    if (version.status === 'failed') throw new Error(`training failed: ${version.error}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }

  const lookup = (name: string, ttl: number) => ({ name, kind: 'lookup', config: { dataset_id: big.id, keys: ['id'], cache_ttl_s: ttl } });
  const service = await call('POST', '/api/publishing/api-services', {
    project_id: project.id,
    name: 'Bench',
    key: 'bench',
    endpoints: [lookup('cached', 3600), lookup('uncached', 0), { name: 'forest', kind: 'model', config: { model_id: trained.model.id } }],
  });
  await call('POST', `/api/publishing/api-services/${service.id}/publish`);
  const { key } = await call('POST', `/api/publishing/api-services/${service.id}/keys`, { name: 'bench' });
  const headers = { 'x-api-key': key };
  const endpoint = `${base}/api/service/bench`;
  const rowsForModel = JSON.stringify({ rows: Array.from({ length: MODEL_ROWS_PER_CALL }, (_, i) => ({ id: randomId(), country: ['FR', 'DE', 'IT', 'ES'][i % 4] })) });

  const cases: Record<CaseName, Load> = {
    lookup_cached: { url: `${endpoint}/cached?id=${HOT_ID}`, headers },
    lookup_uncached: { url: `${endpoint}/uncached?id=1`, headers, request: () => ({ path: `/api/service/bench/uncached?id=${randomId()}` }) },
    batch_of_100_uncached: {
      url: `${endpoint}/uncached`,
      method: 'POST',
      headers,
      request: () => ({ body: JSON.stringify({ keys: Array.from({ length: BATCH_KEYS }, () => ({ id: randomId() })) }) }),
    },
    model_100_rows: { url: `${endpoint}/forest`, method: 'POST', headers, request: () => ({ body: rowsForModel }) },
  };
  // Warm-up: JIT, pools, the cached answer and the model's first load.
  await measure({ url: koaUrl }, 1);
  for (const name of CASES) await measure(cases[name], 1);

  const rounds: Record<string, Awaited<ReturnType<typeof measure>> & { ratio_vs_koa: number }>[] = [];
  const baselines: Awaited<ReturnType<typeof measure>>[] = [];
  for (let i = 0; i < ROUNDS; i += 1) {
    const koa = await measure({ url: koaUrl });
    baselines.push(koa);
    const round: (typeof rounds)[number] = {};
    for (const name of CASES) {
      const result = await measure(cases[name]);
      round[name] = { ...result, ratio_vs_koa: ratio(result.requests_per_s, koa.requests_per_s) };
    }
    rounds.push(round);
  }
  const medianOf = <T>(items: T[], key: (item: T) => number) => [...items].sort((a, b) => key(a) - key(b))[Math.floor(items.length / 2)];
  const figures = Object.fromEntries(
    CASES.map((name) => {
      const middle = medianOf(rounds, (r) => r[name].ratio_vs_koa)[name];
      return [name, { ...middle, ratios_of_rounds: rounds.map((r) => r[name].ratio_vs_koa) }];
    }),
  ) as Partial<Record<CaseName, CaseFigures>>;
  const direct = await directLookups(dialect, kernel.databaseUrl, big.table);
  return {
    dialect,
    koa: medianOf(baselines, (b) => b.requests_per_s),
    ...figures,
    direct_indexed_queries_per_s: direct,
    lookups_per_s_in_batches: figures.batch_of_100_uncached && Math.round(figures.batch_of_100_uncached.requests_per_s * BATCH_KEYS),
    predictions_per_s: figures.model_100_rows && Math.round(figures.model_100_rows.requests_per_s * MODEL_ROWS_PER_CALL),
    model: { algorithm: 'random_forest', trees: 50, training_rows: TRAINING_ROWS, rows_per_call: MODEL_ROWS_PER_CALL },
  };
}

export type ServingFigures = Awaited<ReturnType<typeof benchServing>>;

/** The rows of the summary table for one adapter's figures. */
export function servingRows(f: ServingFigures): Record<string, { value: string }> {
  const rate = (name: CaseName) => {
    const c = f[name];
    if (!c) return 'not measured (BENCH_SERVING_CASES)';
    return `${c.requests_per_s} req/s, p50 ${c.p50_ms} ms, p99 ${c.p99_ms} ms (×${c.ratio_vs_koa} of Koa; rounds ${c.ratios_of_rounds.join(', ')})`;
  };
  const d = f.dialect;
  return {
    [`${d}: bare Koa hello-world (baseline, median round)`]: { value: `${f.koa.requests_per_s} req/s, p50 ${f.koa.p50_ms} ms, p99 ${f.koa.p99_ms} ms` },
    [`${d}: lookup by key, answer cached (target ≥ 0.6 of Koa)`]: { value: rate('lookup_cached') },
    [`${d}: lookup by key, not cached (a random key each call)`]: { value: rate('lookup_uncached') },
    [`${d}: the same indexed query run directly (${d === 'sqlite' ? 'one connection, synchronous' : `${CONNECTIONS} connections`})`]: { value: `${f.direct_indexed_queries_per_s} queries/s` },
    [`${d}: batch of ${BATCH_KEYS} random keys per call`]: { value: `${rate('batch_of_100_uncached')}; ${f.lookups_per_s_in_batches} keys/s` },
    [`${d}: model endpoint, random forest of 50 trees, ${MODEL_ROWS_PER_CALL} rows per call`]: { value: `${rate('model_100_rows')}; ${f.predictions_per_s} predictions/s` },
  };
}
