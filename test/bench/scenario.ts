/**
 * A scenario's overhead per step on each adapter: a 20-step scenario of `sql_check` steps (each a
 * governed `select 1`, so the step's own work is small and constant) against a 1-step one, both
 * timed from the run's start to its end. (20-step time − 1-step time) / 19 is what one more step
 * costs: its row, its pass's bookkeeping and the governed query; the sql_check alone, run through
 * POST /api/sql, is measured too so the scenario's own share can be read off.
 */
import path from 'node:path';
import { loadSettings } from '../../kernel/config.ts';
import { Kernel } from '../../kernel/kernel.ts';
import { createLogger } from '../../kernel/logger.ts';
import { createScratchDatabase } from '../harness/scratch-database.ts';

const STEPS = 20;
const REPEATS = Number(process.env.BENCH_SCENARIO_REPEATS ?? 5);
const FINAL = ['succeeded', 'failed', 'cancelled', 'skipped'];

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface ScenarioFigures {
  dialect: string;
  repeats: number;
  /** Median run time (started_at to ended_at) of the 1-step and the 20-step scenario. */
  one_step_ms: number;
  twenty_steps_ms: number;
  /** What each step beyond the first adds. */
  per_step_ms: number;
  /** Median time of the same query through POST /api/sql (the step's own work, as a client sees it). */
  sql_query_ms: number;
}

export async function benchScenario(dialect: 'sqlite' | 'postgres', work: string, manifests: string): Promise<ScenarioFigures> {
  const dir = path.join(work, `scenario-${dialect}`);
  const database = await createScratchDatabase(dialect, dir);
  const settings = loadSettings({ PORT: '0', DATA_DIR: dir, DATABASE_URL: database.url, MANIFESTS_DIR: manifests, PLUGIN_WATCH: 'false', ADMIN_PASSWORD: 'bench-password', API_RATE_LIMIT_PER_SEC: '0' });
  const kernel = new Kernel({ settings, logger: createLogger('silent'), print: () => undefined });
  await kernel.start();
  try {
    const admin = await kernel.storage.db.selectFrom('users').select(['id', 'role']).orderBy('id').executeTakeFirstOrThrow();
    const token = await kernel.issueToken(admin);
    const api = async (method: string, route: string, body?: unknown) => {
      const res = await fetch(`${kernel.url}${route}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      if (res.status >= 300) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
      return res.json() as Promise<Record<string, any>>;
    };
    const project = await api('POST', '/api/projects', { key: 'BENCH', name: 'Scenarios' });
    const step = { type: 'sql_check', params: { query: 'select 1 as one', expect: 'non_empty' } };
    const one = await api('POST', '/api/pipeline/scenarios', { project_id: project.id, name: 'one step', steps: [step] });
    const twenty = await api('POST', '/api/pipeline/scenarios', { project_id: project.id, name: 'twenty steps', steps: Array.from({ length: STEPS }, () => step) });
    const timed = async (scenarioId: number) => {
      const { run } = await api('POST', `/api/pipeline/scenarios/${scenarioId}/run`);
      for (;;) {
        const now = await api('GET', `/api/pipeline/runs/${run.id}`);
        if (FINAL.includes(now.status)) {
          if (now.status !== 'succeeded') throw new Error(`scenario run ${run.id} ended ${now.status}: ${JSON.stringify(now.error)}`);
          return Date.parse(now.ended_at) - Date.parse(now.started_at);
        }
        await sleep(20);
      }
    };
    await timed(one.id); // warm-up
    await timed(twenty.id);
    const ones: number[] = [];
    const twenties: number[] = [];
    const queries: number[] = [];
    for (let i = 0; i < REPEATS; i++) {
      ones.push(await timed(one.id));
      twenties.push(await timed(twenty.id));
      const started = performance.now();
      await api('POST', '/api/sql', { sql: 'select 1 as one' });
      queries.push(performance.now() - started);
    }
    const oneMs = median(ones);
    const twentyMs = median(twenties);
    return { dialect, repeats: REPEATS, one_step_ms: oneMs, twenty_steps_ms: twentyMs, per_step_ms: Math.round(((twentyMs - oneMs) / (STEPS - 1)) * 10) / 10, sql_query_ms: Math.round(median(queries) * 10) / 10 };
  } finally {
    await kernel.stop();
    await database.drop();
  }
}
