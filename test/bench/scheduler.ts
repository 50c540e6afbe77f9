/**
 * Schedules on each adapter: fire-to-start latency with SCHEDULES schedules firing every second for
 * FIRE_SECONDS s. Each fire is timed from the time it was due to when its work item started the
 * fire (the scheduler's own delay) and to when the run it started began (`started_at` of the build
 * run: what a user sees). With target `job` every schedule runs a job building a dataset no recipe
 * produces, so a run is a build with nothing to do: the figures are the scheduler's and the queue's,
 * not a recipe's; with target `noop` a fire starts nothing (test/fixtures/plugins/noop-schedule-target):
 * the scheduler's cost alone.
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadSettings } from '../../kernel/config.ts';
import { Kernel } from '../../kernel/kernel.ts';
import { createLogger } from '../../kernel/logger.ts';
import { createScratchDatabase } from '../harness/scratch-database.ts';
import { writeManifest } from '../harness/test-kernel.ts';

const SCHEDULES = Number(process.env.BENCH_SCHEDULES ?? 200);
/** At most 60: the window is within one minute. */
const FIRE_SECONDS = Math.min(60, Number(process.env.BENCH_SCHEDULE_SECONDS ?? 30));
/** Time given to create the schedules before the window opens. */
const SETUP_MS = 40_000;
/** How long the window's fires and their runs may take to start once it closed. */
const SETTLE_MS = 30_000;

const percentile = (values: number[], p: number) => (values.length ? [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))] : null);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface SchedulerFigures {
  dialect: string;
  /** `job`: each fire builds a job (a run through the pipeline); `noop`: a target whose fire starts nothing, the scheduler alone. */
  target: 'job' | 'noop';
  schedules: number;
  seconds: number;
  /**
   * Fire times due in the window and fires recorded for them: when the server cannot keep up, a
   * schedule's fire starts late and (catch_up run_once) fires once for the seconds it fell behind,
   * so fewer fires than times due. `missed`: recorded missed (none with run_once).
   */
  due: number;
  fires: number;
  missed: number;
  fire_start_ms: { p50: number | null; p99: number | null; max: number | null };
  run_start_ms: { p50: number | null; p99: number | null; max: number | null; runs: number };
  worker_concurrency: number;
  worker_org_concurrency: number;
}

/**
 * One measure on a fresh database of `dialect`; `concurrency` sets WORKER_CONCURRENCY and
 * WORKER_ORG_CONCURRENCY (default: theirs, 4 and 2). Every schedule is in one organization, so with
 * the defaults its fires and their runs take turns in 2 slots.
 */
export async function benchScheduler(dialect: 'sqlite' | 'postgres', work: string, manifests: string, { concurrency, target = 'job' }: { concurrency?: number; target?: 'job' | 'noop' } = {}): Promise<SchedulerFigures> {
  const dir = path.join(work, `scheduler-${dialect}-${target}-${concurrency ?? 'default'}`);
  fs.mkdirSync(dir, { recursive: true });
  const database = await createScratchDatabase(dialect, dir);
  const workers = concurrency === undefined ? {} : { WORKER_CONCURRENCY: String(concurrency), WORKER_ORG_CONCURRENCY: String(concurrency) };
  const noop = path.join(dir, 'manifests');
  fs.mkdirSync(noop, { recursive: true });
  writeManifest(noop, { id: 'noop_schedule_target', kind: 'extension', depends_on: ['scheduler'] }, 'noop-schedule-target');
  const settings = loadSettings({ PORT: '0', DATA_DIR: dir, DATABASE_URL: database.url, MANIFESTS_DIR: [manifests, noop].join(path.delimiter), PLUGIN_WATCH: 'false', ADMIN_PASSWORD: 'bench-password', API_RATE_LIMIT_PER_SEC: '0', ...workers });
  const kernel = new Kernel({ settings, logger: createLogger('silent'), print: () => undefined });
  await kernel.start();
  try {
    const { db } = kernel.storage;
    const admin = await db.selectFrom('users').select(['id', 'role']).orderBy('id').executeTakeFirstOrThrow();
    const token = await kernel.issueToken(admin);
    const api = async (method: string, route: string, body?: unknown) => {
      const res = await fetch(`${kernel.url}${route}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      if (res.status >= 300) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
      return res.json() as Promise<Record<string, any>>;
    };
    const project = await api('POST', '/api/projects', { key: 'BENCH', name: 'Schedules' });
    const dataset = await api('POST', '/api/datasets', { name: 'ticks', project_id: project.id, columns: [] });
    const job = await api('POST', '/api/pipeline/jobs', { project_id: project.id, name: 'tick', targets: [dataset.id] });
    // Every schedule fires each second of the same window (seconds 0 to FIRE_SECONDS-1 of one
    // minute, UTC), set up before it opens: no request is made while the schedules fire, and they
    // stop on their own when it closes.
    const windowStart = new Date(Math.ceil((Date.now() + SETUP_MS) / 60_000) * 60_000);
    const windowEnd = new Date(windowStart.getTime() + FIRE_SECONDS * 1000);
    const cron = `0-${FIRE_SECONDS - 1} ${windowStart.getUTCMinutes()} ${windowStart.getUTCHours()} * * *`;
    const scheduled = target === 'job' ? { job_id: job.id } : { noop_id: project.id };
    for (let i = 0; i < SCHEDULES; i++) await api('POST', '/api/scheduler/schedules', { project_id: project.id, name: `every second ${i}`, target: scheduled, cron, catch_up: 'run_once' });
    if (Date.now() >= windowStart.getTime()) throw new Error(`setting ${SCHEDULES} schedules up took longer than ${SETUP_MS} ms`);
    await sleep(windowEnd.getTime() - Date.now());

    const inWindow = () =>
      db
        .selectFrom('scheduler_fires as f')
        .leftJoin('pipeline_runs as r', 'r.id', 'f.run_id')
        .select(['f.fire_at', 'f.started_at', 'f.outcome', 'r.started_at as run_started_at'])
        .where('f.fire_at', '>=', windowStart.toISOString())
        .where('f.fire_at', '<', windowEnd.toISOString())
        .execute();
    // The window's fires still queued when it closed (the server behind), and the runs not started yet.
    const firesLeft = async () =>
      Number(
        (
          await db
            .selectFrom('background_work')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('kind', '=', 'scheduler.fire')
            .where('status', 'in', ['queued', 'running'])
            .where('run_after', '<', windowEnd.toISOString())
            .executeTakeFirstOrThrow()
        ).n,
      );
    const deadline = Date.now() + SETTLE_MS;
    let rows = await inWindow();
    while (((await firesLeft()) > 0 || rows.some((r) => r.outcome === 'firing' || (target === 'job' && r.outcome === 'fired' && r.run_started_at === null))) && Date.now() < deadline) {
      await sleep(500);
      rows = await inWindow();
    }
    const fireStart = rows.map((r) => Date.parse(r.started_at) - Date.parse(r.fire_at));
    const runStart = rows.filter((r) => r.run_started_at !== null).map((r) => Date.parse(r.run_started_at) - Date.parse(r.fire_at));
    return {
      dialect,
      target,
      schedules: SCHEDULES,
      seconds: FIRE_SECONDS,
      due: SCHEDULES * FIRE_SECONDS,
      fires: rows.length,
      missed: rows.filter((r) => r.outcome === 'missed').length,
      fire_start_ms: { p50: percentile(fireStart, 50), p99: percentile(fireStart, 99), max: percentile(fireStart, 100) },
      run_start_ms: { p50: percentile(runStart, 50), p99: percentile(runStart, 99), max: percentile(runStart, 100), runs: runStart.length },
      worker_concurrency: settings.WORKER_CONCURRENCY,
      worker_org_concurrency: settings.WORKER_ORG_CONCURRENCY,
    };
  } finally {
    await kernel.stop();
    await database.drop();
  }
}
