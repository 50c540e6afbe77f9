import { Worker } from 'node:worker_threads';
import type { ModelArtifact } from './learn.ts';

const WORKER_MODULE = new URL('./predict-worker.mjs', import.meta.url);
/** The heap of the prediction thread: the loaded versions (up to 32 forests) and a call's rows. */
const MEMORY_LIMIT_MB = 1024;

type Scored = { predictions: unknown[]; probabilities?: Record<string, number>[] };
type Answer = { id: number; result?: Scored; missing?: true; error?: string };

interface Pending {
  versionId: number;
  rows: Record<string, unknown>[];
  artifactOf: () => Promise<ModelArtifact>;
  resolve(result: Scored): void;
  reject(error: Error): void;
}

/**
 * Scores rows with trained (ml.js) versions in a thread of its own, so that a forest of hundreds
 * of trees over thousands of rows never holds up the requests the server answers meanwhile. One
 * thread, started on first use, its calls answered in turn; each version's artifact is sent to it
 * once (again only if it let the version go). A thread that fails fails the calls it held, and the
 * next call starts another.
 */
export class PredictionThread {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  predict(versionId: number, rows: Record<string, unknown>[], artifactOf: () => Promise<ModelArtifact>): Promise<Scored> {
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { versionId, rows, artifactOf, resolve, reject });
      this.thread().postMessage({ id, versionId, rows });
    });
  }

  /** Stops the thread (the plugin unloads): calls it held fail. */
  async dispose(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    this.failAll(new Error('the prediction thread stopped'));
    await worker?.terminate();
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_MODULE, { execArgv: [], resourceLimits: { maxOldGenerationSizeMb: MEMORY_LIMIT_MB } });
    worker.unref();
    worker.on('message', (answer: Answer) => void this.answered(worker, answer));
    const failed = (error: Error) => {
      if (this.worker !== worker) return;
      this.worker = null;
      this.failAll(error);
    };
    worker.on('error', (err) => failed(new Error(`the prediction thread failed: ${err.message}`)));
    worker.on('exit', (code) => failed(new Error(`the prediction thread stopped (code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private async answered(worker: Worker, answer: Answer): Promise<void> {
    const call = this.pending.get(answer.id);
    if (!call) return;
    if (answer.missing) {
      try {
        const artifact = await call.artifactOf();
        if (this.worker === worker) worker.postMessage({ id: answer.id, versionId: call.versionId, artifact, rows: call.rows });
      } catch (err) {
        this.pending.delete(answer.id);
        call.reject(err as Error);
      }
      return;
    }
    this.pending.delete(answer.id);
    if (answer.error !== undefined) call.reject(new Error(answer.error));
    else call.resolve(answer.result!);
  }

  private failAll(error: Error): void {
    for (const call of this.pending.values()) call.reject(error);
    this.pending.clear();
  }
}
