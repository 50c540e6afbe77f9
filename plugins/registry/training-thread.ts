import { Worker } from 'node:worker_threads';
import type { TrainingRequest, TrainingResult } from './learn.ts';

const WORKER_MODULE = new URL('./train-worker.mjs', import.meta.url);
/** The heap a training thread may use: the rows are copied in, and a forest's trees grow beside them. */
const MEMORY_LIMIT_MB = 1024;

/** Why training failed (a single class, too few rows): the run's error says it. */
export class TrainingError extends Error {
  override name = 'TrainingError';
}

/**
 * Trains in a worker thread, so the server keeps serving: resolves with its result, rejects with a
 * TrainingError saying why it could not, or with the signal's reason once aborted (the thread is
 * terminated at once).
 */
export function trainInThread(request: TrainingRequest, signal: AbortSignal): Promise<TrainingResult> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_MODULE, { workerData: request, execArgv: [], resourceLimits: { maxOldGenerationSizeMb: MEMORY_LIMIT_MB } });
    const onAbort = () => void worker.terminate();
    const settle = (done: () => void) => {
      signal.removeEventListener('abort', onAbort);
      done();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    worker.once('message', (message: { ok: true; result: string } | { ok: false; error: string }) => {
      settle(() => (message.ok ? resolve(JSON.parse(message.result) as TrainingResult) : reject(new TrainingError(message.error))));
      void worker.terminate();
    });
    worker.once('error', (err) => settle(() => reject(signal.aborted ? signal.reason : new TrainingError(`the training thread failed: ${err.message}`))));
    worker.once('exit', () => settle(() => reject(signal.aborted ? signal.reason : new TrainingError('the training thread stopped before it answered'))));
  });
}
