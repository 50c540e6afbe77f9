/**
 * Background work on each adapter: enqueue-to-start latency of trivial items enqueued one at a
 * time on an idle queue (started_at − created_at, as the database recorded them), and the
 * throughput of a burst of trivial items from enqueue to the last one succeeded.
 */
import path from 'node:path';
import { loadSettings } from '../../kernel/config.ts';
import { Kernel } from '../../kernel/kernel.ts';
import { createLogger } from '../../kernel/logger.ts';
import { activeLifecycle } from '../../kernel/registry/lifecycle.ts';
import { backgroundWorkFor } from '../../kernel/work/background-work.ts';
import { createScratchDatabase } from '../harness/scratch-database.ts';

const LATENCY_ITEMS = 200;
const BURST_ITEMS = 2_000;

const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length * p) / 100))];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function benchBackgroundWork(dialect: 'sqlite' | 'postgres', work: string, manifests: string) {
  const database = await createScratchDatabase(dialect, path.join(work, `work-${dialect}`));
  const settings = loadSettings({ PORT: '0', DATA_DIR: path.join(work, `work-${dialect}`), DATABASE_URL: database.url, MANIFESTS_DIR: manifests, PLUGIN_WATCH: 'false', ADMIN_PASSWORD: 'bench-password' });
  const kernel = new Kernel({ settings, logger: createLogger('silent'), print: () => undefined });
  await kernel.start();
  const disposables: (() => void | Promise<void>)[] = [];
  try {
    const work = backgroundWorkFor('bench', { storage: kernel.storage, runner: kernel.work, logger: kernel.logger, defaultTimeoutMs: 60_000, drainTimeoutMs: 0 }, activeLifecycle(disposables));
    work.handle('noop', async () => null);
    const { db } = kernel.storage;
    const settled = async (kindFilter: number[]) => {
      for (;;) {
        const left = await db.selectFrom('background_work').select((eb) => eb.fn.countAll().as('n')).where('id', 'in', kindFilter).where('status', 'in', ['queued', 'running']).executeTakeFirstOrThrow();
        if (Number(left.n) === 0) return;
        await sleep(5);
      }
    };

    const latencyIds: number[] = [];
    for (let i = 0; i < LATENCY_ITEMS; i++) {
      const item = await work.enqueue('noop', { orgId: 1 });
      latencyIds.push(item!.id);
      await settled([item!.id]);
    }
    const rows = await db.selectFrom('background_work').select(['created_at', 'started_at']).where('id', 'in', latencyIds).execute();
    const latencies = rows.map((r) => Date.parse(r.started_at) - Date.parse(r.created_at));

    const began = performance.now();
    const burstIds: number[] = [];
    // Several organizations, so the per-organization limit is not what is measured.
    for (let i = 0; i < BURST_ITEMS; i++) burstIds.push((await work.enqueue('noop', { orgId: null }))!.id);
    const enqueued = performance.now() - began;
    await settled(burstIds);
    const total = performance.now() - began;
    return {
      dialect,
      enqueue_to_start_ms: { p50: percentile(latencies, 50), p99: percentile(latencies, 99), items: LATENCY_ITEMS },
      burst: { items: BURST_ITEMS, enqueue_per_s: Math.round((BURST_ITEMS / enqueued) * 1000), completed_per_s: Math.round((BURST_ITEMS / total) * 1000), worker_concurrency: settings.WORKER_CONCURRENCY },
    };
  } finally {
    for (const dispose of disposables) await dispose();
    await kernel.stop();
    await database.drop();
  }
}
