/**
 * Pipelines, run by test/bench/run.ts on each adapter against a kernel process it started:
 * 1. GET /healthz under a light load while `group` recipe runs over the 1,000,000-row dataset
 *    follow each other, against the same load alone (target: p99 within 3× of idle);
 * 2. a `group` recipe against the same INSERT … SELECT written by hand and run through the
 *    storage's own connection (target: direct / recipe ≥ 0.9), with few groups and with one
 *    group per row (the second shows what copying a large result costs);
 * 3. a plugin recipe type copying its input through the worker thread: rows/s against an upload
 *    of the same rows as CSV (target ≥ 0.5), and the server's RSS during the copy;
 * 4. a `build_required` job over a chain of 50 trivial recipes: cold, with nothing changed, and
 *    after the head dataset changed.
 * BENCH_PIPELINE_PARTS (comma-separated: group, healthz, copy, chain; default all) picks parts;
 * healthz makes the group part's recipes, so group runs with it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline as streamPipeline } from 'node:stream/promises';
import { sql } from 'kysely';
import { openStorage } from '../../storage/index.ts';
import type { DialectName } from '../harness/dialects.ts';
import { api, BENCH_COLUMNS, createFilledDataset, LONG_READ_ROWS, physicalTable, type BenchKernel } from './bench-dataset.ts';
import { uploadCsv } from './ingest.ts';
import { pacedLoad, summarize } from './paced-load.ts';

/** Seconds of light load, alone and while recipes run, in each round. */
const LOAD_S = Number(process.env.BENCH_PIPELINE_LOAD_S ?? 10);
/**
 * Rounds of the healthz and copy parts: each round measures both sides back to back, and the
 * median round's ratio is reported (on a shared machine one side of one round can be hit alone).
 */
const ROUNDS = Number(process.env.BENCH_PIPELINE_ROUNDS ?? 3);
const LOAD_CONNECTIONS = 2;
const LOAD_RATE_PER_S = 100;
/** Timed rounds of each grouping, after one first run (reported apart: it may start processes); the best of each side counts. */
const GROUP_RUNS = 5;
/** Rows the handler copy reads (the 1,000,000-row dataset unless set lower). */
const COPY_ROWS = Number(process.env.BENCH_PIPELINE_COPY_ROWS ?? LONG_READ_ROWS);
const CHAIN = 50;
/** Which parts run (BENCH_PIPELINE_PARTS, comma-separated, default all): group, healthz, copy, chain. */
const PARTS = new Set((process.env.BENCH_PIPELINE_PARTS ?? 'group,healthz,copy,chain').split(',').map((part) => part.trim()));
const POLL_MS = 20;
const RSS_SAMPLE_MS = 200;

/** The kernel process the figures are measured on: its pid (for RSS) besides its address and database. */
export interface PipelineKernel extends BenchKernel {
  pid: number;
  dataDir: string;
}

/** The recipe type the copy measures: a manifest without entry and its handler module, in `dir`. */
export const COPY_TYPE = 'bench_copy';
export function writeCopyRecipeType(dir: string): string {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(
    path.join(dir, 'copy.mjs'),
    `export async function copy(ctx) {
  const [input] = ctx.inputs;
  await ctx.output.columns(input.dataset.columns);
  let batch = [];
  for await (const row of input.rows()) {
    batch.push(row);
    if (batch.length === 1000) {
      await ctx.output.write(batch);
      batch = [];
    }
  }
  if (batch.length) await ctx.output.write(batch);
}
`,
  );
  const manifest = {
    id: 'bench_copy',
    version: '1.0.0',
    kind: 'recipe-type',
    description: 'Bench: copies its input through a handler in a worker thread',
    depends_on: ['pipeline'],
    recipe_types: [{ id: COPY_TYPE, handler: 'copy:copy', params: { type: 'object' }, description: 'Copies its input, row by row, in batches of 1000' }],
  };
  fs.writeFileSync(path.join(dir, 'bench_copy.json'), JSON.stringify(manifest));
  return dir;
}

/** Two groupings of the dataset: the recipe's params and the same statement by hand (`{source}`, `{target}`). */
const GROUPINGS = {
  few_groups: {
    params: {
      keys: ['country', 'day'],
      aggregations: [
        { fn: 'count', as: 'n' },
        { column: 'amount', fn: 'sum', as: 'total' },
        { column: 'amount', fn: 'avg', as: 'mean' },
        { column: 'id', fn: 'min', as: 'first_id' },
        { column: 'id', fn: 'max', as: 'last_id' },
        { column: 'amount', fn: 'count_distinct', as: 'amounts' },
      ],
    },
    direct: 'insert into {target} (country, day, n, total, mean, first_id, last_id, amounts) select country, day, count(*), sum(amount), avg(amount), min(id), max(id), count(distinct amount) from {source} group by country, day',
  },
  one_group_per_row: {
    params: { keys: ['id'], aggregations: [{ fn: 'count', as: 'n' }, { column: 'amount', fn: 'sum', as: 'total' }, { column: 'day', fn: 'max', as: 'last_day' }] },
    direct: 'insert into {target} (id, n, total, last_day) select id, count(*), sum(amount), max(day) from {source} group by id',
  },
} as const;

const FINAL = ['succeeded', 'failed', 'cancelled', 'skipped'];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ratio = (value: number, baseline: number) => (baseline > 0 ? Math.round((value / baseline) * 100) / 100 : null);
const ms = (value: number) => Math.round(value);

type Run = { id: number; status: string; started_at: string | null; ended_at: string | null; duration_ms: number | null; rows_written: number | null; error: unknown };

/** Current resident set size of a process, from /proc (Linux), in MB. */
function rssMb(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Math.round(Number(kb) / 1024);
}

export async function benchPipeline(dialect: DialectName, kernel: PipelineKernel, token: string) {
  const { base } = kernel;
  const call = (method: string, route: string, body?: unknown) => api(base, method, route, token, body);
  const project = await call('POST', '/api/projects', { key: 'PIPE', name: 'Pipeline bench' });
  const projectId = Number(project.id);
  const big = await createFilledDataset(dialect, kernel, token, projectId, 'pipeline_rows');

  /** Polls a run every POLL_MS until it ends (or `until` holds); answers it and when the poll saw it. */
  const poll = async (runId: number, until: (run: Run) => boolean = (run) => FINAL.includes(run.status)) => {
    for (;;) {
      const run = (await call('GET', `/api/pipeline/runs/${runId}`)) as Run;
      if (until(run)) return { run, seenAt: performance.now() };
      await sleep(POLL_MS);
    }
  };
  /** Starts a run by POSTing `route`; answers the run and the moments of the POST (wall clock and monotonic). */
  const start = async (route: string) => {
    const postedAt = Date.now();
    const postedPerf = performance.now();
    const { run } = (await call('POST', route)) as { run: Run };
    return { run, postedAt, postedPerf };
  };
  /** A run from its POST to its end: to its ended_at (the server's clock), to the poll that saw it end, and its own duration. */
  const timed = async (route: string) => {
    const started = await start(route);
    const { run, seenAt } = await poll(started.run.id);
    if (run.status !== 'succeeded') throw new Error(`${route}: run ${run.id} ended ${run.status}: ${JSON.stringify(run.error)}`);
    return { run, to_ended_at_ms: Date.parse(run.ended_at!) - started.postedAt, polled_ms: ms(seenAt - started.postedPerf), duration_ms: run.duration_ms! };
  };

  /**
   * Where a run's time went, from its log lines' times: from its start to "reading …" (type and
   * datasets looked up), to "computed …" (planned, checked, staging table made, governed statement
   * run), to its end (outputs swapped in, run ended).
   */
  const phasesOf = async (run: Run) => {
    const { items } = (await call('GET', `/api/pipeline/runs/${run.id}/logs`)) as { items: { ts: string; message: string }[] };
    const at = (prefix: string) => Date.parse(items.find((l) => l.message.startsWith(prefix))?.ts ?? '');
    const started = Date.parse(run.started_at!);
    const reading = at('reading');
    const computed = at('computed');
    return { start_to_reading: reading - started, reading_to_computed: computed - reading, computed_to_ended: Date.parse(run.ended_at!) - computed };
  };

  // 2. Each grouping as a recipe, then by hand through the storage's own connection (also for part 1: its recipes).
  const grouping: Record<string, unknown> = {};
  const groupRecipes: Record<string, number> = {};
  const storage = openStorage(kernel.databaseUrl, kernel.dataDir);
  try {
    for (const [name, { params, direct }] of PARTS.has('group') || PARTS.has('healthz') ? Object.entries(GROUPINGS) : []) {
      const output = await call('POST', '/api/datasets', { name: `grouped_${name}`, project_id: projectId, columns: [] });
      const recipe = await call('POST', '/api/pipeline/recipes', { project_id: projectId, name: `group ${name}`, type: 'group', inputs: [big.id], outputs: [output.id], params });
      groupRecipes[name] = Number(recipe.id);
      const first = await timed(`/api/pipeline/recipes/${recipe.id}/run`);
      if (!PARTS.has('group')) continue; // only made for part 1

      // The same statement into a dataset's table of the recipe output's columns, emptied before each run (not timed).
      const { columns } = await call('GET', `/api/datasets/${output.id}`);
      const target = await call('POST', '/api/datasets', { name: `direct_${name}`, project_id: projectId, columns: columns.map((c: { name: string; type: string }) => ({ name: c.name, type: c.type })) });
      const targetTable = physicalTable(dialect, target);
      const statement = direct.replace('{target}', targetTable).replace('{source}', big.table);
      const byHand = async (text: string) => {
        await sql.raw(`delete from ${targetTable}`).execute(storage.db);
        const began = performance.now();
        const result = await sql.raw(text).execute(storage.db);
        return { ms: performance.now() - began, rows: Number(result.numAffectedRows ?? 0) };
      };
      // SQLite only: the governed write's own steps by hand (sqlite-governed-write-process.mjs): the
      // statement as the runner wraps it, into a TEMP table, then copied into the target.
      const [insertInto, select] = statement.split(/ (?=select )/);
      const wrapped = `with "pipeline_rows" as (select ${BENCH_COLUMNS.map((c) => `"${c.name}"`).join(', ')} from ${big.table}) select * from (\n${select.replace(big.table, '"pipeline_rows"')}\n/**/) as governed_query`;
      const throughTemp = async () => {
        await sql.raw(`delete from ${targetTable}`).execute(storage.db);
        await sql.raw('drop table if exists temp.bench_result').execute(storage.db);
        const began = performance.now();
        await sql.raw(`create table temp.bench_result as ${wrapped}`).execute(storage.db);
        const computed = performance.now();
        await sql.raw(`${insertInto} select * from temp.bench_result`).execute(storage.db);
        const copied = performance.now();
        await sql.raw('drop table temp.bench_result').execute(storage.db);
        return { ms: copied - began, temp_ms: computed - began, copy_ms: copied - computed };
      };

      // Rounds of: the recipe, the statement by hand (and on SQLite through TEMP), back to back so a change in the machine's load hits both.
      const runs = [];
      const directTimes: number[] = [];
      const tempTimes: { ms: number; temp_ms: number; copy_ms: number }[] = [];
      let directRows = 0;
      for (let i = 0; i < GROUP_RUNS; i += 1) {
        runs.push(await timed(`/api/pipeline/recipes/${recipe.id}/run`));
        const done = await byHand(statement);
        directTimes.push(done.ms);
        directRows = done.rows;
        if (dialect === 'sqlite') tempTimes.push(await throughTemp());
      }
      const best = runs.reduce((a, b) => (b.to_ended_at_ms < a.to_ended_at_ms ? b : a));
      const phases = await phasesOf(best.run);
      const bestTemp = tempTimes.length ? tempTimes.reduce((a, b) => (b.ms < a.ms ? b : a)) : null;
      const directMs = Math.min(...directTimes);
      if (directRows !== best.run.rows_written) throw new Error(`${name}: the recipe wrote ${best.run.rows_written} rows, the direct statement ${directRows}`);
      grouping[name] = {
        rows_in: big.rows,
        rows_out: best.run.rows_written,
        first_run: { to_ended_at_ms: first.to_ended_at_ms, duration_ms: first.duration_ms },
        recipe_to_ended_at_ms: best.to_ended_at_ms,
        recipe_polled_ms: best.polled_ms,
        recipe_duration_ms: best.duration_ms,
        recipe_runs_to_ended_at_ms: runs.map((r) => r.to_ended_at_ms),
        recipe_phases_ms: phases,
        direct_ms: ms(directMs),
        direct_runs_ms: directTimes.map(ms),
        governed_steps_by_hand_ms: bestTemp && { total: ms(bestTemp.ms), into_temp: ms(bestTemp.temp_ms), copy_from_temp: ms(bestTemp.copy_ms) },
        ratio_direct_vs_recipe: ratio(directMs, best.to_ended_at_ms),
        ratio_direct_vs_run_duration: ratio(directMs, best.duration_ms),
      };
    }
  } finally {
    await storage.close();
  }

  const healthzDuringRecipe = async () => {
    // 1. /healthz under light load, alone, then while group recipe runs follow each other (the
    // load starts once the first is running; a run that ends before the load does is followed by another).
    const lightLoad = (seconds = LOAD_S) => pacedLoad({ url: `${base}/healthz`, connections: LOAD_CONNECTIONS, ratePerS: LOAD_RATE_PER_S, seconds });
    // Warm-up (connections, JIT), and a pause for what the runs above left behind (events, garbage).
    await lightLoad(1);
    await sleep(2000);
    /** The light load while runs of the recipe follow each other: it starts once the first is running. */
    const loadDuring = async (recipeId: number) => {
      let loading = true;
      let loadEnded = 0;
      const spans: [number, number][] = [];
      const first = await start(`/api/pipeline/recipes/${recipeId}/run`);
      await poll(first.run.id, (run) => run.status !== 'queued');
      const loadStarted = Date.now();
      const load = lightLoad().finally(() => {
        loading = false;
        loadEnded = Date.now();
      });
      let current = first.run.id;
      for (;;) {
        const { run } = await poll(current);
        if (run.status !== 'succeeded') throw new Error(`run ${run.id} ended ${run.status}: ${JSON.stringify(run.error)}`);
        spans.push([Date.parse(run.started_at!), Date.parse(run.ended_at!)]);
        if (!loading) break;
        current = (await start(`/api/pipeline/recipes/${recipeId}/run`)).run.id;
      }
      const latencies = await load;
      // The share of the load's window during which a recipe was running (runs follow each other, never overlap).
      const runningMs = spans.reduce((sum, [from, to]) => sum + Math.max(0, Math.min(to, loadEnded) - Math.max(from, loadStarted)), 0);
      return { latencies, recipe_runs: spans.length, share_of_window_running: ratio(runningMs, loadEnded - loadStarted) };
    };
    type During = Awaited<ReturnType<typeof loadDuring>>;
    const rounds: { idle: number[]; few_groups: During; one_group_per_row: During }[] = [];
    for (let i = 0; i < ROUNDS; i += 1) {
      const idle = await lightLoad();
      rounds.push({ idle, few_groups: await loadDuring(groupRecipes.few_groups), one_group_per_row: await loadDuring(groupRecipes.one_group_per_row) });
    }
    // The latencies of every round pooled: a p99 of many requests, which one hiccup of the machine moves less.
    const idle = summarize(rounds.flatMap((r) => r.idle));
    const pooled = (grouping: 'few_groups' | 'one_group_per_row') => {
      const during = summarize(rounds.flatMap((r) => r[grouping].latencies));
      return {
        idle,
        ...during,
        p99_ratio_vs_idle: ratio(during.p99_ms, idle.p99_ms),
        p99_ratios_of_rounds: rounds.map((r) => ratio(summarize(r[grouping].latencies).p99_ms, summarize(r.idle).p99_ms)),
        recipe_runs: rounds.reduce((sum, r) => sum + r[grouping].recipe_runs, 0),
        share_of_window_running: ratio(rounds.reduce((sum, r) => sum + (r[grouping].share_of_window_running ?? 0), 0), rounds.length),
      };
    };
    return {
      load: { connections: LOAD_CONNECTIONS, requests_per_s: LOAD_RATE_PER_S, seconds: LOAD_S, rounds: ROUNDS },
      during_group_few_groups: pooled('few_groups'),
      during_group_one_group_per_row: pooled('one_group_per_row'),
    };
  };

  const copyThroughHandler = async () => {
    // 3. The handler copy against an upload of the same rows as CSV (exported from the dataset, not timed).
    const source = COPY_ROWS === big.rows ? big : await createFilledDataset(dialect, kernel, token, projectId, 'copy_rows', COPY_ROWS);
    const csv = path.join(kernel.dataDir, 'pipeline-copy-rows.csv');
    const exported = await fetch(`${base}/api/datasets/${source.id}/export?format=csv`, { headers: { authorization: `Bearer ${token}` } });
    if (!exported.ok || !exported.body) throw new Error(`export: ${exported.status}`);
    await streamPipeline(Readable.fromWeb(exported.body as import('node:stream/web').ReadableStream), fs.createWriteStream(csv));
    const copied = await call('POST', '/api/datasets', { name: 'copied_rows', project_id: projectId, columns: [] });
    const copyRecipe = await call('POST', '/api/pipeline/recipes', { project_id: projectId, name: 'copy', type: COPY_TYPE, inputs: [source.id], outputs: [copied.id], params: {} });
    /** One round: the CSV upload (a new dataset each time), then the copy, with the server's RSS sampled while it copies. */
    const round = async (i: number) => {
      const uploaded = await call('POST', '/api/datasets', { name: `uploaded_rows_${i}`, project_id: projectId, columns: BENCH_COLUMNS });
      const upload = await uploadCsv(base, token, Number(uploaded.id), csv);
      if (upload.rows !== source.rows) throw new Error(`the upload loaded ${upload.rows} rows of ${source.rows}`);
      await sleep(1000); // let the server settle (garbage from the upload) before the copy
      const rssBefore = rssMb(kernel.pid);
      const samples: { at: number; rss: number }[] = [];
      const sampler = setInterval(() => samples.push({ at: performance.now(), rss: rssMb(kernel.pid) }), RSS_SAMPLE_MS);
      let copy;
      try {
        copy = await timed(`/api/pipeline/recipes/${copyRecipe.id}/run`);
      } finally {
        clearInterval(sampler);
      }
      if (copy.run.rows_written !== source.rows) throw new Error(`the copy wrote ${copy.run.rows_written} rows of ${source.rows}`);
      const copySeconds = copy.to_ended_at_ms / 1000;
      const first0 = samples[0]?.at ?? 0;
      const span = (samples.at(-1)?.at ?? 0) - first0;
      /** Peak RSS over the samples up to `share` of the copy's time (rows stream at a steady rate: time stands for rows). */
      const peakUpTo = (share: number) => Math.max(rssBefore, ...samples.filter((s) => s.at - first0 <= span * share).map((s) => s.rss));
      return {
        rows: source.rows,
        copy_to_ended_at_ms: copy.to_ended_at_ms,
        copy_duration_ms: copy.duration_ms,
        copy_rows_per_s: Math.round(source.rows / copySeconds),
        upload_seconds: Math.round(upload.seconds * 100) / 100,
        upload_rows_per_s: Math.round(upload.rows / upload.seconds),
        ratio_copy_vs_upload: ratio(source.rows / copySeconds, upload.rows / upload.seconds),
        server_rss_mb: {
          before: rssBefore,
          peak_at_25_percent_of_time: peakUpTo(0.25),
          peak_at_50_percent_of_time: peakUpTo(0.5),
          peak_at_100_percent_of_time: peakUpTo(1),
          max_minus_before: peakUpTo(1) - rssBefore,
          samples: samples.length,
        },
      };
    };
    const rounds: Awaited<ReturnType<typeof round>>[] = [];
    for (let i = 0; i < ROUNDS; i += 1) rounds.push(await round(i));
    fs.rmSync(csv);
    return { ...medianRound(rounds, (r) => r.ratio_copy_vs_upload ?? 0), ratios_of_rounds: rounds.map((r) => r.ratio_copy_vs_upload) };
  };

  const buildChain = async () => {
    // 4. A chain of CHAIN `select` recipes from a 10-row dataset, built by a build_required job.
    const datasets: number[] = [];
    const column = [{ name: 'n', type: 'integer' }];
    const head = await call('POST', '/api/datasets', { name: 'chain_0', project_id: projectId, columns: column });
    await call('POST', `/api/datasets/${head.id}/rows`, Array.from({ length: 10 }, (_, i) => ({ n: i + 1 })));
    datasets.push(Number(head.id));
    for (let i = 1; i <= CHAIN; i += 1) {
      const next = await call('POST', '/api/datasets', { name: `chain_${i}`, project_id: projectId, columns: column });
      await call('POST', '/api/pipeline/recipes', { project_id: projectId, name: `step ${i}`, type: 'select', inputs: [datasets[i - 1]], outputs: [next.id], params: { columns: [{ name: 'n' }] } });
      datasets.push(Number(next.id));
    }
    const job = await call('POST', '/api/pipeline/jobs', { project_id: projectId, name: 'chain', targets: [datasets[CHAIN]], mode: 'build_required' });
    const build = async () => {
      const result = await timed(`/api/pipeline/jobs/${job.id}/run`);
      const { items } = (await call('GET', `/api/pipeline/runs?parent_run_id=${result.run.id}&limit=500`)) as { items: Run[] };
      const ran = items.filter((c) => c.status === 'succeeded');
      const statuses: Record<string, number> = {};
      for (const child of items) statuses[child.status] = (statuses[child.status] ?? 0) + 1;
      const ownMs = ran.reduce((sum, c) => sum + (c.duration_ms ?? 0), 0);
      return {
        to_ended_at_ms: result.to_ended_at_ms,
        polled_ms: result.polled_ms,
        children: statuses,
        ms_per_recipe: Math.round((result.to_ended_at_ms / CHAIN) * 10) / 10,
        mean_child_duration_ms: ran.length ? Math.round((ownMs / ran.length) * 10) / 10 : null,
      };
    };
    const cold = await build();
    const unchanged = await build();
    await call('POST', `/api/datasets/${head.id}/rows`, [{ n: 11 }]);
    const headChanged = await build();
    return { recipes: CHAIN, cold, unchanged, head_changed: headChanged };
  };

  return {
    dialect,
    rows: big.rows,
    healthz_during_recipe: PARTS.has('healthz') ? await healthzDuringRecipe() : null,
    group_vs_direct: PARTS.has('group') ? grouping : null,
    handler_copy: PARTS.has('copy') ? await copyThroughHandler() : null,
    build_chain: PARTS.has('chain') ? await buildChain() : null,
  };
}

export type PipelineFigures = Awaited<ReturnType<typeof benchPipeline>>;

/** The round whose `key` is the median (of an even count, the lower one). */
function medianRound<T>(rounds: T[], key: (round: T) => number): T {
  return [...rounds].sort((a, b) => key(a) - key(b))[Math.floor((rounds.length - 1) / 2)];
}

type GroupFigures = { rows_out: number; recipe_to_ended_at_ms: number; recipe_duration_ms: number; direct_ms: number; ratio_direct_vs_recipe: number | null; ratio_direct_vs_run_duration: number | null };

/** The rows of the summary table for one adapter's figures. */
export function pipelineRows(figures: PipelineFigures): Record<string, { value: string | number }> {
  const { dialect, healthz_during_recipe: h, handler_copy: c, build_chain: b } = figures;
  const rows: Record<string, { value: string | number }> = {};
  for (const [label, during] of h ? ([['few groups', h.during_group_few_groups], ['one group per row', h.during_group_one_group_per_row]] as const) : []) {
    rows[`${dialect}: GET /healthz idle → during group (${label}) runs, ${during.requests} requests of ${h!.load.rounds} rounds (target p99 ≤ 3× idle)`] = {
      value: `p50 ${during.idle.p50_ms} → ${during.p50_ms} ms, p99 ${during.idle.p99_ms} → ${during.p99_ms} ms (×${during.p99_ratio_vs_idle}; rounds ${during.p99_ratios_of_rounds.map((r) => `×${r}`).join(', ')}; ${during.recipe_runs} runs, ${Math.round((during.share_of_window_running ?? 0) * 100)}% of the window)`,
    };
  }
  for (const [name, g] of Object.entries(figures.group_vs_direct ?? {}) as [string, GroupFigures][]) {
    rows[`${dialect}: group (${name}, ${g.rows_out} rows out) recipe ${g.recipe_to_ended_at_ms} ms (run ${g.recipe_duration_ms} ms) vs direct ${g.direct_ms} ms (target ≥ 0.9)`] = {
      value: `${g.ratio_direct_vs_recipe} (vs run duration ${g.ratio_direct_vs_run_duration})`,
    };
  }
  if (c) {
    rows[`${dialect}: handler copy ${c.rows} rows ${c.copy_rows_per_s} rows/s vs CSV upload ${c.upload_rows_per_s} rows/s, median of ${c.ratios_of_rounds.length} rounds (target ≥ 0.5)`] = { value: `${c.ratio_copy_vs_upload} (rounds ${c.ratios_of_rounds.join(', ')})` };
    rows[`${dialect}: server RSS during the copy: before / peak at 25%, 50%, 100% of its time (MB)`] = {
      value: `${c.server_rss_mb.before} / ${c.server_rss_mb.peak_at_25_percent_of_time}, ${c.server_rss_mb.peak_at_50_percent_of_time}, ${c.server_rss_mb.peak_at_100_percent_of_time} (+${c.server_rss_mb.max_minus_before})`,
    };
  }
  const chain = (label: string, run: NonNullable<PipelineFigures['build_chain']>['cold']) => {
    rows[`${dialect}: build_required over ${b!.recipes} recipes, ${label} (${Object.entries(run.children).map(([s, n]) => `${n} ${s}`).join(', ')})`] = { value: `${run.to_ended_at_ms} ms, ${run.ms_per_recipe} ms per recipe` };
  };
  if (b) {
    chain('cold', b.cold);
    chain('nothing changed', b.unchanged);
    chain('head changed', b.head_changed);
  }
  return rows;
}
