/**
 * `npm run bench`: measures, in one run on this machine, a bare Koa hello-world against a kernel
 * route without auth and GET /api/me with a JWT and a PAT, in alternating rounds (the ratio is what
 * matters: both sides run under the same load on the same box),
 * the kernel's start-up time with every manifest loaded, and the time one plugin reload takes.
 * Prints a table and writes test/bench/results/latest.json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { loadSettings } from '../../kernel/config.ts';
import { Kernel } from '../../kernel/kernel.ts';
import { createLogger } from '../../kernel/logger.ts';
import { REPO_ROOT, writeManifest } from '../harness/test-kernel.ts';
import { INGEST_ROWS, peakRssMb, rawPostgresCopySeconds, rawSqliteInsertSeconds, sqlAggregate, uploadCsv, writeCsv } from './ingest.ts';
import { createScratchDatabase } from '../harness/scratch-database.ts';
import { DIALECTS, type DialectName } from '../harness/dialects.ts';
import { benchLongReads, longReadRows, type LongReadFigures } from './long-reads.ts';
import { benchBackgroundWork } from './background-work.ts';
import { benchPipeline, pipelineRows, writeCopyRecipeType, type PipelineFigures } from './pipeline.ts';
import { benchServing, servingRows, type ServingFigures } from './serving.ts';
import { aiRows, benchAi, type AiFigures } from './ai.ts';
import { benchScheduler, type SchedulerFigures } from './scheduler.ts';
import { benchDbt, dbtRows, type DbtFigures } from './dbt.ts';
import { benchScenario, type ScenarioFigures } from './scenario.ts';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
/** Throughput rounds: each runs the baseline and every kernel case back to back; ratios are per round. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const STARTUP_RUNS = 5;
/** Size of the large upload that shows memory does not follow file size (issue 4: 1 GB); 0 skips it. */
const LARGE_CSV_MB = Number(process.env.BENCH_LARGE_CSV_MB ?? 1024);
const RELOAD_RUNS = 20;
/** BENCH_PIPELINE=0 skips the pipeline figures (test/bench/pipeline.ts); BENCH_ONLY=pipeline measures only them. */
const PIPELINE = process.env.BENCH_PIPELINE !== '0';
const ONLY_PIPELINE = process.env.BENCH_ONLY === 'pipeline';
/** BENCH_SCHEDULER=0 skips the schedule figures (test/bench/scheduler.ts); BENCH_ONLY=scheduler measures only them. */
const SCHEDULER = process.env.BENCH_SCHEDULER !== '0';
const ONLY_SCHEDULER = process.env.BENCH_ONLY === 'scheduler';
/** BENCH_ONLY=dbt measures only the dbt import (test/bench/dbt.ts). */
const ONLY_DBT = process.env.BENCH_ONLY === 'dbt';
/** BENCH_ONLY=scenario measures only a scenario's overhead per step (test/bench/scenario.ts). */
const ONLY_SCENARIO = process.env.BENCH_ONLY === 'scenario';
/** BENCH_SERVING=0 skips the serving figures (test/bench/serving.ts); BENCH_ONLY=serving measures only them. */
const SERVING = process.env.BENCH_SERVING !== '0';
const ONLY_SERVING = process.env.BENCH_ONLY === 'serving';
/** BENCH_AI=0 skips the AI figures (test/bench/ai.ts); BENCH_ONLY=ai measures only them. */
const AI = process.env.BENCH_AI !== '0';
const ONLY_AI = process.env.BENCH_ONLY === 'ai';

/** A BENCH_ONLY run's end: its figures written to test/bench/results/<part>.json, the scratch directory removed. */
function writeOnly(part: string, figures: unknown, work: string): void {
  const out = path.join(REPO_ROOT, `test/bench/results/${part}.json`);
  fs.writeFileSync(out, `${JSON.stringify({ measured_at: new Date().toISOString(), machine: { cpus: os.cpus().length, node: process.version }, [part]: figures }, null, 2)}\n`);
  console.log(`results written to ${path.relative(REPO_ROOT, out)}`);
  fs.rmSync(work, { recursive: true, force: true });
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Node flags for the processes started (BENCH_NODE_FLAGS, space-separated, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile the server). */
const NODE_FLAGS = (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean);

/** The processes the bench itself stopped (any other end is reported). */
const stopped = new WeakSet<ChildProcess>();
const STOP_WAIT_MS = 15_000;
/** Stops a process gracefully and waits for its end (a profile, with BENCH_NODE_FLAGS, is written then), killing it after STOP_WAIT_MS. */
async function stopProcess(child: ChildProcess): Promise<void> {
  stopped.add(child);
  if (child.exitCode !== null || child.signalCode !== null) return;
  const ended = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_WAIT_MS);
  await ended;
  clearTimeout(timer);
}

/** Starts `node --import tsx <args>`: one process, so its pid is the server's (for its RSS). */
function startProcess(args: string[], env: NodeJS.ProcessEnv, readyPattern: RegExp): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...NODE_FLAGS, '--import', 'tsx', ...args], { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const timer = setTimeout(() => reject(new Error(`${args.join(' ')} did not start in 30 s`)), 30_000);
    // The end of what it printed, shown should it end on its own (a crash mid-bench).
    let tail = '';
    const keep = (chunk: Buffer) => (tail = (tail + chunk.toString()).slice(-4000));
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    child.once('exit', (code, signal) => {
      if (!stopped.has(child)) console.error(`${args.join(' ')} ended (code ${code}, signal ${signal}); its output ended with:\n${tail}`);
    });
    child.stdout!.on('data', (chunk: Buffer) => {
      if (readyPattern.test(chunk.toString())) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}

async function load(url: string, headers: Record<string, string> = {}) {
  await autocannon({ url, headers, connections: CONNECTIONS, duration: 1 }); // warm-up (JIT, pools)
  const result = await autocannon({ url, headers, connections: CONNECTIONS, duration: DURATION_S });
  if (result.non2xx || result.errors) throw new Error(`${url}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  return { requests_per_s: Math.round(result.requests.average), latency_p50_ms: result.latency.p50, latency_p99_ms: result.latency.p99 };
}

/** Settings of a benchmarked kernel process: production mode, silent, no per-address limits. */
function kernelEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  return {
    LOG_LEVEL: 'silent',
    NODE_ENV: 'production',
    JWT_SECRET: 'b'.repeat(40),
    PAT_HASH_KEY: 'c'.repeat(40),
    VAULT_KEY: 'd'.repeat(40),
    ADMIN_PASSWORD: 'bench-password',
    // The load comes from one address: the per-address limits would measure themselves.
    AUTH_RATE_LIMIT_PER_SEC: '0',
    API_RATE_LIMIT_PER_SEC: '0',
    // An edit in the checkout while the bench runs must not reload plugins under it (the reload's own time is measured apart).
    PLUGIN_WATCH: 'false',
    ...extra,
  };
}

/** A kernel on a scratch Postgres database: the CSV through the API, against COPY of pre-parsed rows. */
async function ingestOnPostgres(work: string, csv: string, manifests: string) {
  const database = await createScratchDatabase('postgres', work);
  const port = await freePort();
  const server = await startProcess(
    ['kernel/main.ts'],
    kernelEnv({ PORT: String(port), DATABASE_URL: database.url, DATA_DIR: path.join(work, 'data-postgres'), MANIFESTS_DIR: manifests }),
    /listening/,
  );
  try {
    const base = `http://127.0.0.1:${port}`;
    const { jwt } = await credentials(base);
    const project = await post(base, '/api/projects', { key: 'BENCH', name: 'Bench' }, jwt);
    const dataset = await post(base, '/api/datasets', { name: 'bench_rows', project_id: project.id }, jwt);
    const upload = await uploadCsv(base, jwt, Number(dataset.id), csv);
    const copy = await rawPostgresCopySeconds(database.url);
    return {
      rows: upload.rows,
      api_seconds: Math.round(upload.seconds * 100) / 100,
      copy_seconds: Math.round(copy * 100) / 100,
      ratio_api_vs_copy: ratio(copy, upload.seconds),
      server_peak_rss_mb: peakRssMb(server.pid!),
    };
  } finally {
    await stopProcess(server);
    await database.drop();
  }
}

/** The long-read figures (long-reads.ts) of a kernel process on a scratch database of `dialect`. */
async function longReadsOn(dialect: DialectName, work: string, manifests: string): Promise<LongReadFigures> {
  const database = await createScratchDatabase(dialect, work);
  const port = await freePort();
  const env = kernelEnv({ PORT: String(port), DATABASE_URL: database.url, DATA_DIR: path.join(work, `data-long-reads-${dialect}`), MANIFESTS_DIR: manifests });
  const server = await startProcess(['kernel/main.ts'], env, /listening/);
  try {
    const base = `http://127.0.0.1:${port}`;
    return await benchLongReads(dialect, { base, databaseUrl: database.url }, (await credentials(base)).jwt);
  } finally {
    await stopProcess(server);
    await database.drop();
  }
}

/**
 * The pipeline figures (pipeline.ts) of a kernel process on a scratch database of `dialect`, its
 * manifests with a recipe type of the bench's own (a manifest and a handler module in `work`).
 */
async function pipelineOn(dialect: DialectName, work: string, manifests: string): Promise<PipelineFigures> {
  const database = await createScratchDatabase(dialect, work);
  const port = await freePort();
  const dataDir = path.join(work, `data-pipeline-${dialect}`);
  fs.mkdirSync(dataDir, { recursive: true });
  const plugin = writeCopyRecipeType(path.join(work, 'pipeline-plugin'));
  const env = kernelEnv({ PORT: String(port), DATABASE_URL: database.url, DATA_DIR: dataDir, MANIFESTS_DIR: [manifests, plugin].join(path.delimiter) });
  const server = await startProcess(['kernel/main.ts'], env, /listening/);
  try {
    const base = `http://127.0.0.1:${port}`;
    return await benchPipeline(dialect, { base, databaseUrl: database.url, pid: server.pid!, dataDir }, (await credentials(base)).jwt);
  } finally {
    await stopProcess(server);
    await database.drop();
  }
}

/** The pipeline figures on each adapter, each timed and printed as it ends. */
async function pipelineOnEach(work: string, manifests: string) {
  const figures: Partial<Record<DialectName, PipelineFigures & { bench_seconds: number }>> = {};
  for (const dialect of DIALECTS) {
    const began = performance.now();
    figures[dialect] = { ...(await pipelineOn(dialect, work, manifests)), bench_seconds: Math.round((performance.now() - began) / 1000) };
    console.table(pipelineRows(figures[dialect]!));
  }
  return figures;
}

/** The serving figures (serving.ts) of a kernel process on a scratch database of `dialect`, against a bare Koa process. */
async function servingOn(dialect: DialectName, work: string, manifests: string): Promise<ServingFigures> {
  const database = await createScratchDatabase(dialect, work);
  const [port, koaPort] = [await freePort(), await freePort()];
  const env = kernelEnv({ PORT: String(port), DATABASE_URL: database.url, DATA_DIR: path.join(work, `data-serving-${dialect}`), MANIFESTS_DIR: manifests });
  const [server, koa] = await Promise.all([startProcess(['kernel/main.ts'], env, /listening/), startProcess(['test/bench/hello-koa.ts', String(koaPort)], {}, /ready/)]);
  try {
    const base = `http://127.0.0.1:${port}`;
    return await benchServing(dialect, { base, databaseUrl: database.url }, (await credentials(base)).jwt, `http://127.0.0.1:${koaPort}/`);
  } finally {
    await Promise.all([stopProcess(server), stopProcess(koa)]);
    await database.drop();
  }
}

/** The serving figures on each adapter, each printed as it ends. */
async function servingOnEach(work: string, manifests: string) {
  const figures: ServingFigures[] = [];
  for (const dialect of DIALECTS) {
    figures.push(await servingOn(dialect, work, manifests));
    console.table(servingRows(figures.at(-1)!));
  }
  return figures;
}

/** The AI figures (ai.ts) of a kernel process on a scratch database of `dialect`; its model server on loopback is allowed. */
async function aiOn(dialect: DialectName, work: string, manifests: string): Promise<AiFigures> {
  const database = await createScratchDatabase(dialect, work);
  const port = await freePort();
  const env = kernelEnv({ PORT: String(port), DATABASE_URL: database.url, DATA_DIR: path.join(work, `data-ai-${dialect}`), MANIFESTS_DIR: manifests, OUTBOUND_ALLOWED_HOSTS: '127.0.0.1' });
  const server = await startProcess(['kernel/main.ts'], env, /listening/);
  try {
    const base = `http://127.0.0.1:${port}`;
    return await benchAi(dialect, { base, databaseUrl: database.url }, (await credentials(base)).jwt);
  } finally {
    await stopProcess(server);
    await database.drop();
  }
}

/** The AI figures on each adapter, each printed as it ends. */
async function aiOnEach(work: string, manifests: string) {
  const figures: AiFigures[] = [];
  for (const dialect of DIALECTS) {
    figures.push(await aiOn(dialect, work, manifests));
    console.table(aiRows(figures.at(-1)!));
  }
  return figures;
}

/** The dbt import figures on each adapter, each printed as it ends. */
async function dbtOnEach(work: string, manifests: string): Promise<DbtFigures[]> {
  const figures: DbtFigures[] = [];
  for (const dialect of DIALECTS) {
    figures.push(await benchDbt(dialect, work, manifests));
    console.table(dbtRows(figures.at(-1)!));
  }
  return figures;
}

/** A 20-step scenario's overhead per step on each adapter, each printed as it ends. */
async function scenarioOnEach(work: string, manifests: string): Promise<ScenarioFigures[]> {
  const figures: ScenarioFigures[] = [];
  for (const dialect of DIALECTS) {
    const f = await benchScenario(dialect, work, manifests);
    figures.push(f);
    console.table({ [`${dialect}: scenario of sql_check steps (median of ${f.repeats})`]: { '1 step (ms)': f.one_step_ms, '20 steps (ms)': f.twenty_steps_ms, 'per step (ms)': f.per_step_ms, 'POST /api/sql alone (ms)': f.sql_query_ms } });
  }
  return figures;
}

/**
 * Fire-to-start latency of schedules firing every second on each adapter: fires building a job with
 * the default worker slots (4 per instance, 2 per organization: every schedule is in one) and with
 * 16 of each, and fires that start nothing (the scheduler alone) with the defaults; each printed as
 * it ends.
 */
async function schedulerOnEach(work: string, manifests: string) {
  const figures: Partial<Record<DialectName, Record<string, SchedulerFigures>>> = {};
  const cases = [{ target: 'job' as const }, { target: 'job' as const, concurrency: 16 }, { target: 'noop' as const }];
  for (const dialect of DIALECTS) {
    const measured: Record<string, SchedulerFigures> = {};
    for (const options of cases) {
      const f = await benchScheduler(dialect, work, manifests, options);
      measured[`${f.target}_worker_concurrency_${f.worker_concurrency}_per_org_${f.worker_org_concurrency}`] = f;
      console.table({
        [`${dialect}, target ${f.target}, ${f.worker_concurrency}/${f.worker_org_concurrency} worker slots: ${f.schedules} schedules every second for ${f.seconds} s, ${f.fires} fires of ${f.due} times due`]: {},
        'due -> fire started (ms)': { p50: f.fire_start_ms.p50, p99: f.fire_start_ms.p99, max: f.fire_start_ms.max },
        ...(f.target === 'job' ? { 'due -> run started (ms)': { p50: f.run_start_ms.p50, p99: f.run_start_ms.p99, max: f.run_start_ms.max } } : {}),
      });
    }
    figures[dialect] = measured;
  }
  return figures;
}

/** A CSV of about LARGE_CSV_MB uploaded into a dataset of its own: the server's peak RSS before and after. */
async function ingestLargeFile(base: string, jwt: string, projectId: number, work: string, bytesPerRow: number, pid: number) {
  const file = path.join(work, 'ingest-large.csv');
  const bytes = writeCsv(file, Math.round((LARGE_CSV_MB * 1024 * 1024) / bytesPerRow));
  // Writing the file blocked this event loop for longer than the server's keep-alive: let fetch
  // see the idle connections the server closed meanwhile before it picks one to send on.
  await new Promise((resolve) => setTimeout(resolve, 200));
  const before = peakRssMb(pid);
  const dataset = await post(base, '/api/datasets', { name: 'bench_large', project_id: projectId }, jwt);
  const upload = await uploadCsv(base, jwt, Number(dataset.id), file);
  fs.rmSync(file);
  return {
    rows: upload.rows,
    csv_mb: Math.round(bytes / 1024 / 1024),
    api_seconds: Math.round(upload.seconds * 10) / 10,
    server_peak_rss_mb_before: before,
    server_peak_rss_mb_after: peakRssMb(pid),
  };
}

async function post(base: string, route: string, body: unknown, token?: string) {
  const response = await fetch(`${base}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw new Error(`${route}: ${response.status} ${await response.text()}`);
  return response.json() as Promise<Record<string, string>>;
}

/** A JWT from the login route and a PAT minted with it, as a client would get them. */
async function credentials(base: string) {
  const { access_token: jwt } = await post(base, '/api/auth/login', { username: 'admin', password: 'bench-password' });
  const { token: pat } = await post(base, '/api/auth/tokens', { name: 'bench' }, jwt);
  return { jwt, pat };
}

const ratio = (value: number, baseline: number) => Math.round((value / baseline) * 100) / 100;

type Measured = Awaited<ReturnType<typeof load>>;

/**
 * ROUNDS rounds of: the baseline, then each case. Answers each case's median round (by its ratio to
 * the baseline of the same round) with every round's ratio, and the baseline's median round.
 */
async function throughputRounds<K extends string>(baselineUrl: string, cases: Record<K, { url: string; headers?: Record<string, string> }>) {
  const names = Object.keys(cases) as K[];
  const baselines: Measured[] = [];
  const measured = Object.fromEntries(names.map((name) => [name, [] as (Measured & { ratio_vs_koa: number })[]])) as Record<K, (Measured & { ratio_vs_koa: number })[]>;
  for (let round = 0; round < ROUNDS; round += 1) {
    const koaRound = await load(baselineUrl);
    baselines.push(koaRound);
    for (const name of names) {
      const result = await load(cases[name].url, cases[name].headers);
      measured[name].push({ ...result, ratio_vs_koa: ratio(result.requests_per_s, koaRound.requests_per_s) });
    }
  }
  const medianBy = <T>(items: T[], key: (item: T) => number) => [...items].sort((a, b) => key(a) - key(b))[Math.floor(items.length / 2)];
  const summary = Object.fromEntries(
    names.map((name) => {
      const rounds = measured[name];
      const middle = medianBy(rounds, (r) => r.ratio_vs_koa);
      return [name, { ...middle, median_ratio_vs_koa: middle.ratio_vs_koa, ratio_per_round: rounds.map((r) => r.ratio_vs_koa) }];
    }),
  ) as unknown as Record<K, Measured & { median_ratio_vs_koa: number; ratio_per_round: number[] }>;
  return { baseline: medianBy(baselines, (b) => b.requests_per_s), ...summary };
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const round = (ms: number) => Math.round(ms * 10) / 10;

async function main() {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'dp-bench-'));
  const manifests = path.join(work, 'manifests');
  fs.mkdirSync(manifests);
  for (const file of fs.readdirSync(path.join(REPO_ROOT, 'manifests'))) {
    const manifest = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'manifests', file), 'utf8'));
    if (manifest.entry) manifest.entry = path.relative(manifests, path.resolve(REPO_ROOT, 'manifests', manifest.entry));
    fs.writeFileSync(path.join(manifests, file), JSON.stringify(manifest));
  }
  writeManifest(manifests, { id: 'probe', router: { prefix: '/api/probe', tag: 'probe' } }, 'probe');
  const manifestCount = fs.readdirSync(manifests).length;

  if (ONLY_DBT) return writeOnly('dbt', await dbtOnEach(work, manifests), work);

  if (ONLY_PIPELINE) return writeOnly('pipeline', await pipelineOnEach(work, manifests), work);
  if (ONLY_SERVING) return writeOnly('serving', await servingOnEach(work, manifests), work);
  if (ONLY_AI) return writeOnly('ai', await aiOnEach(work, manifests), work);
  if (ONLY_SCENARIO) return writeOnly('scenario', await scenarioOnEach(work, manifests), work);
  if (ONLY_SCHEDULER) return writeOnly('scheduler', await schedulerOnEach(work, manifests), work);

  // Throughput: both servers are separate processes loaded the same way. The baseline and the kernel
  // cases alternate, round after round, so a change in the machine's load hits both sides of a ratio.
  const koaPort = await freePort();
  const koa = await startProcess(['test/bench/hello-koa.ts', String(koaPort)], {}, /ready/);
  const kernelPort = await freePort();
  const kernelProcess = await startProcess(['kernel/main.ts'], kernelEnv({ PORT: String(kernelPort), DATA_DIR: path.join(work, 'data-load'), MANIFESTS_DIR: manifests }), /listening/);
  const base = `http://127.0.0.1:${kernelPort}`;
  let baseline, kernelRoute, meWithJwt, meWithPat, ingest, rowsPages, sqlQuery, largeIngest;
  try {
    const { jwt, pat } = await credentials(base);
    const rounds = await throughputRounds(`http://127.0.0.1:${koaPort}/`, {
      kernel_route_no_auth: { url: `${base}/api/probe` },
      me_with_jwt: { url: `${base}/api/me`, headers: { authorization: `Bearer ${jwt}` } },
      me_with_pat: { url: `${base}/api/me`, headers: { authorization: `Bearer ${pat}` } },
    });
    ({ baseline, kernel_route_no_auth: kernelRoute, me_with_jwt: meWithJwt, me_with_pat: meWithPat } = rounds);

    // Ingest through the API against the raw driver, then page reads.
    // Flat memory: a quarter-size file first, then the full one; peak RSS must not grow with the size.
    const quarter = path.join(work, 'ingest-quarter.csv');
    writeCsv(quarter, Math.round(INGEST_ROWS / 4));
    const csv = path.join(work, 'ingest.csv');
    const csvBytes = writeCsv(csv);
    const rssBefore = peakRssMb(kernelProcess.pid!);
    const project = await post(base, '/api/projects', { key: 'BENCH', name: 'Bench' }, jwt);
    const dataset = await post(base, '/api/datasets', { name: 'bench_rows', project_id: project.id }, jwt);
    await uploadCsv(base, jwt, Number(dataset.id), quarter);
    const rssAfterQuarter = peakRssMb(kernelProcess.pid!);
    const upload = await uploadCsv(base, jwt, Number(dataset.id), csv);
    const raw = rawSqliteInsertSeconds(work);
    ingest = {
      rows: upload.rows,
      csv_mb: Math.round(csvBytes / 1024 / 1024),
      api_seconds: Math.round(upload.seconds * 100) / 100,
      api_rows_per_s: Math.round(upload.rows / upload.seconds),
      raw_driver_seconds: Math.round(raw * 100) / 100,
      raw_driver_rows_per_s: Math.round(INGEST_ROWS / raw),
      ratio_api_vs_raw: ratio(raw, upload.seconds),
      server_peak_rss_mb_before: rssBefore,
      server_peak_rss_mb_after_quarter_file: rssAfterQuarter,
      server_peak_rss_mb_after_full_file: peakRssMb(kernelProcess.pid!),
    };
    rowsPages = await load(`${base}/api/datasets/${dataset.id}/rows?limit=100&sort=-amount&filter=country:eq:FR`, { authorization: `Bearer ${jwt}` });
    sqlQuery = await sqlAggregate(base, jwt, path.join(work, 'data-load', 'platform.db'), `org_1__ds_${dataset.id}`);
    if (LARGE_CSV_MB > 0) largeIngest = await ingestLargeFile(base, jwt, Number(project.id), work, csvBytes / INGEST_ROWS, kernelProcess.pid!);
  } finally {
    await Promise.all([stopProcess(koa), stopProcess(kernelProcess)]);
  }

  // The same ingest on Postgres, against COPY FROM STDIN, when a server is at hand.
  const postgresIngest = process.env.TEST_DATABASE_URL ? await ingestOnPostgres(work, path.join(work, 'ingest.csv'), manifests) : null;

  // Long reads on each adapter: light requests while a profile and an export run; statistics against a direct query.
  const longReads: Partial<Record<DialectName, LongReadFigures>> = {};
  for (const dialect of DIALECTS) longReads[dialect] = await longReadsOn(dialect, work, manifests);

  // Background work on each adapter: enqueue-to-start latency on an idle queue, burst throughput.
  const backgroundWork = [];
  for (const dialect of DIALECTS) backgroundWork.push(await benchBackgroundWork(dialect, work, manifests));

  // Pipelines on each adapter: light requests during recipe runs, recipes against direct SQL, a handler copy, a build chain.
  const pipeline = PIPELINE ? await pipelineOnEach(work, manifests) : null;

  // Schedules on each adapter: fire-to-start latency of schedules firing every second.
  const scheduler = SCHEDULER ? await schedulerOnEach(work, manifests) : null;
  // A 20-step scenario's overhead per step on each adapter.
  const scenario = await scenarioOnEach(work, manifests);
  // API Services on each adapter: lookups cached and not, batches, model predictions.
  const serving = SERVING ? await servingOnEach(work, manifests) : null;
  const ai = AI ? await aiOnEach(work, manifests) : null;
  // dbt import of the largest fixture manifest on each adapter.
  const dbt = await dbtOnEach(work, manifests);

  // Start-up and reload, in process, on a fresh SQLite database each time.
  const startups: number[] = [];
  const reloads: number[] = [];
  for (let run = 0; run < STARTUP_RUNS; run += 1) {
    const settings = loadSettings({ PORT: '0', DATA_DIR: path.join(work, `data-${run}`), MANIFESTS_DIR: manifests, PLUGIN_WATCH: 'false', ADMIN_PASSWORD: 'bench-password' });
    const kernel = new Kernel({ settings, logger: createLogger('silent'), print: () => undefined });
    const started = performance.now();
    await kernel.start();
    startups.push(performance.now() - started);
    if (run === STARTUP_RUNS - 1) {
      for (let i = 0; i < RELOAD_RUNS; i += 1) {
        const began = performance.now();
        await kernel.registry.reload('probe');
        reloads.push(performance.now() - began);
      }
    }
    await kernel.stop();
  }

  const results = {
    measured_at: new Date().toISOString(),
    machine: { cpus: os.cpus().length, node: process.version },
    load: { connections: CONNECTIONS, duration_s: DURATION_S, rounds: ROUNDS },
    koa_hello_world: baseline,
    kernel_route_no_auth: kernelRoute,
    me_with_jwt: meWithJwt,
    me_with_pat: meWithPat,
    ingest,
    rows_page_sorted_filtered: rowsPages,
    sql_aggregate: sqlQuery,
    ingest_postgres: postgresIngest,
    ingest_large_file: largeIngest ?? null,
    long_reads: longReads,
    background_work: backgroundWork,
    pipeline,
    scheduler,
    scenario,
    serving,
    ai,
    dbt,
    throughput_ratio_kernel_vs_koa: kernelRoute.median_ratio_vs_koa,
    throughput_ratio_me_jwt_vs_koa: meWithJwt.median_ratio_vs_koa,
    throughput_ratio_me_pat_vs_koa: meWithPat.median_ratio_vs_koa,
    startup_ms: { manifests: manifestCount, median: round(median(startups)), runs: startups.map(round) },
    plugin_reload_ms: { median: round(median(reloads)), max: round(Math.max(...reloads)), runs: RELOAD_RUNS },
  };
  console.table({
    'koa hello-world': { 'req/s': baseline.requests_per_s, 'p50 ms': baseline.latency_p50_ms, 'p99 ms': baseline.latency_p99_ms },
    'kernel route (no auth)': { 'req/s': kernelRoute.requests_per_s, 'p50 ms': kernelRoute.latency_p50_ms, 'p99 ms': kernelRoute.latency_p99_ms },
    'GET /api/me (JWT)': { 'req/s': meWithJwt.requests_per_s, 'p50 ms': meWithJwt.latency_p50_ms, 'p99 ms': meWithJwt.latency_p99_ms },
    'GET /api/me (PAT)': { 'req/s': meWithPat.requests_per_s, 'p50 ms': meWithPat.latency_p50_ms, 'p99 ms': meWithPat.latency_p99_ms },
    'GET /rows (100, sorted, filtered)': { 'req/s': rowsPages.requests_per_s, 'p50 ms': rowsPages.latency_p50_ms, 'p99 ms': rowsPages.latency_p99_ms },
  });
  console.table({
    [`CSV ingest, ${ingest.rows} rows × 10 columns (${ingest.csv_mb} MB)`]: { seconds: ingest.api_seconds, 'rows/s': ingest.api_rows_per_s },
    'raw driver: prepared insert, one transaction': { seconds: ingest.raw_driver_seconds, 'rows/s': ingest.raw_driver_rows_per_s },
  });
  console.table({
    'kernel / koa throughput': { value: results.throughput_ratio_kernel_vs_koa },
    '/api/me JWT / koa throughput (target ≥ 0.75)': { value: results.throughput_ratio_me_jwt_vs_koa },
    '/api/me PAT / koa throughput (target ≥ 0.75)': { value: results.throughput_ratio_me_pat_vs_koa },
    [`start-up, ${manifestCount} manifests (median ms)`]: { value: results.startup_ms.median },
    'plugin reload (median ms)': { value: results.plugin_reload_ms.median },
    'plugin reload (max ms)': { value: results.plugin_reload_ms.max },
    'ingest API / raw driver (target ≥ 0.5)': { value: ingest.ratio_api_vs_raw },
    [`POST /api/sql aggregate: ${sqlQuery.api_ms} ms, direct ${sqlQuery.direct_ms} ms`]: { value: sqlQuery.ratio_direct_vs_api },
    ...(postgresIngest
      ? { [`Postgres ingest: API ${postgresIngest.api_seconds} s, COPY ${postgresIngest.copy_seconds} s (target ≥ 0.5)`]: { value: postgresIngest.ratio_api_vs_copy } }
      : {}),
    'server peak RSS: before / after ¼ file / after full file (MB)': {
      value: `${ingest.server_peak_rss_mb_before} / ${ingest.server_peak_rss_mb_after_quarter_file} / ${ingest.server_peak_rss_mb_after_full_file}`,
    },
    ...(largeIngest
      ? { [`${largeIngest.csv_mb} MB CSV (${largeIngest.rows} rows): ${largeIngest.api_seconds} s; server peak RSS before / after (MB)`]: { value: `${largeIngest.server_peak_rss_mb_before} / ${largeIngest.server_peak_rss_mb_after}` } }
      : {}),
  });
  console.table(Object.assign({}, ...Object.entries(longReads).map(([dialect, figures]) => longReadRows(dialect as DialectName, figures))));
  console.table(
    Object.fromEntries(
      backgroundWork.map((figures) => [
        `background work (${figures.dialect})`,
        {
          'enqueue→start p50 ms': figures.enqueue_to_start_ms.p50,
          'enqueue→start p99 ms': figures.enqueue_to_start_ms.p99,
          [`burst of ${figures.burst.items}: enqueued/s`]: figures.burst.enqueue_per_s,
          'completed/s': figures.burst.completed_per_s,
        },
      ]),
    ),
  );
  if (pipeline) console.table(Object.assign({}, ...Object.values(pipeline).map((figures) => pipelineRows(figures))));
  const out = path.join(REPO_ROOT, 'test/bench/results/latest.json');
  fs.writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`results written to ${path.relative(REPO_ROOT, out)}`);
  fs.rmSync(work, { recursive: true, force: true });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
