import { Worker } from 'node:worker_threads';
import type { DbtResource } from './manifest.ts';

/** How long one model's Jinja may take to render, and the heap the rendering thread may use. */
const RENDER_TIMEOUT_MS = 5_000;
const RENDER_HEAP_MB = 128;

export type Rendered = { sql: string; reads: string[] } | { error: string };

/** A model to render: its raw Jinja, its package (refs prefer it) and its own dataset (`this`). */
export interface RenderJob {
  uniqueId: string;
  packageName: string;
  rawCode: string;
  dataset: string;
}

/** What `ref()` and `source()` resolve to: each resource's dataset name. */
export interface RenderTargets {
  refs: { uniqueId: string; name: string; package: string; dataset: string }[];
  sources: { uniqueId: string; source: string; table: string; dataset: string }[];
}

export function renderTargets(resources: DbtResource[], datasetOf: Map<string, string>): RenderTargets {
  const named = resources.filter((r) => datasetOf.has(r.uniqueId));
  return {
    refs: named.filter((r) => r.resourceType !== 'source').map((r) => ({ uniqueId: r.uniqueId, name: r.name, package: r.packageName, dataset: datasetOf.get(r.uniqueId)! })),
    sources: named.filter((r) => r.resourceType === 'source').map((r) => ({ uniqueId: r.uniqueId, source: r.sourceName ?? '', table: r.name, dataset: datasetOf.get(r.uniqueId)! })),
  };
}

/**
 * Renders models' raw Jinja (`render-worker.mjs`) one after the other in a worker thread: a model
 * whose rendering takes longer than RENDER_TIMEOUT_MS or exhausts the thread's heap ends the
 * thread and is answered with that error, and a new thread renders the rest.
 */
export async function renderModels(jobs: RenderJob[], targets: RenderTargets): Promise<Map<string, Rendered>> {
  const results = new Map<string, Rendered>();
  let pending = [...jobs];
  while (pending.length) {
    // Plain JavaScript: without the server's module hooks (tsx), the thread starts in a fraction of the time.
    const worker = new Worker(new URL('./render-worker.mjs', import.meta.url), { workerData: targets, execArgv: [], resourceLimits: { maxOldGenerationSizeMb: RENDER_HEAP_MB } });
    try {
      pending = await renderSome(worker, pending, results);
    } finally {
      await worker.terminate();
    }
  }
  return results;
}

/** Renders jobs in order until one fails the thread; answers the jobs left after that one. */
function renderSome(worker: Worker, jobs: RenderJob[], results: Map<string, Rendered>): Promise<RenderJob[]> {
  return new Promise((resolve) => {
    let index = 0;
    let timer: NodeJS.Timeout;
    const next = () => {
      if (index >= jobs.length) return resolve([]);
      timer = setTimeout(() => fail(`rendering the Jinja took longer than ${RENDER_TIMEOUT_MS / 1000} s`), RENDER_TIMEOUT_MS);
      worker.postMessage(jobs[index]);
    };
    const fail = (error: string) => {
      clearTimeout(timer);
      worker.removeAllListeners();
      results.set(jobs[index].uniqueId, { error });
      resolve(jobs.slice(index + 1));
    };
    worker.on('message', (answer: { uniqueId: string } & Rendered) => {
      clearTimeout(timer);
      const { uniqueId: _id, ...rendered } = answer;
      results.set(jobs[index].uniqueId, rendered);
      index++;
      next();
    });
    worker.on('error', (err) => fail(`rendering the Jinja failed: ${(err as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY' ? 'it used too much memory' : err.message}`));
    next();
  });
}
