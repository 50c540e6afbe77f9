import { Worker } from 'node:worker_threads';

const WORKER_MODULE = new URL('./predict-worker.mjs', import.meta.url);
/** The heap of the prediction thread: the loaded versions (up to 32 forests) and a call's rows. */
const MEMORY_LIMIT_MB = 1024;
/** Times a call asks for its version to be loaded again after the thread said it lacks it. */
const RELOADS_MAX = 2;

type Scored = { predictions: unknown[]; probabilities?: Record<string, number>[] };
type Answer = { id: number; result?: Scored; missing?: true; error?: string };

interface Pending {
  versionId: number;
  rows: Record<string, unknown>[];
  /** The version's artifact as its JSON text: parsed in the thread, not on the request path. */
  artifactOf: () => Promise<string>;
  reloads: number;
  resolve(result: Scored): void;
  reject(error: Error): void;
}

/**
 * Scores rows with trained (ml.js) versions in a thread of its own, so that a forest of hundreds
 * of trees over thousands of rows never holds up the requests the server answers meanwhile. One
 * thread, started on first use, its calls answered in turn. A version's artifact is sent to it once,
 * before the first call that needs it (the thread reads its messages in order), and again only if
 * the thread let the version go. A thread that fails fails the calls it held, and the next call
 * starts another.
 */
export class PredictionThread {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  /** The versions sent to the current thread (or being read to be sent), by id. */
  private readonly sent = new Map<number, Promise<void>>();

  async predict(versionId: number, rows: Record<string, unknown>[], artifactOf: () => Promise<string>): Promise<Scored> {
    await this.send(versionId, artifactOf);
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.pending.set(id, { versionId, rows, artifactOf, reloads: 0, resolve, reject });
      this.thread().postMessage({ id, versionId, rows });
    });
  }

  /** Stops the thread (the plugin unloads): calls it held fail. */
  async dispose(): Promise<void> {
    const worker = this.worker;
    this.stopped(new Error('the prediction thread stopped'));
    await worker?.terminate();
  }

  /** Sends the version's artifact to the thread unless it was sent already. */
  private send(versionId: number, artifactOf: () => Promise<string>): Promise<void> {
    let sending = this.sent.get(versionId);
    if (!sending) {
      const worker = this.thread();
      sending = artifactOf().then((artifact) => worker.postMessage({ load: versionId, artifact }));
      sending.catch(() => this.sent.delete(versionId));
      this.sent.set(versionId, sending);
    }
    return sending;
  }

  private thread(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_MODULE, { execArgv: [], resourceLimits: { maxOldGenerationSizeMb: MEMORY_LIMIT_MB } });
    worker.unref();
    worker.on('message', (answer: Answer) => void this.answered(answer));
    const failed = (error: Error) => {
      if (this.worker === worker) this.stopped(error);
    };
    worker.on('error', (err) => failed(new Error(`the prediction thread failed: ${err.message}`)));
    worker.on('exit', (code) => failed(new Error(`the prediction thread stopped (code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private async answered(answer: Answer): Promise<void> {
    const call = this.pending.get(answer.id);
    if (!call) return;
    if (answer.missing && call.reloads < RELOADS_MAX) {
      // Let go by the thread (or it could not load it): sent again, then the call.
      call.reloads += 1;
      this.sent.delete(call.versionId);
      try {
        await this.send(call.versionId, call.artifactOf);
        this.thread().postMessage({ id: answer.id, versionId: call.versionId, rows: call.rows });
      } catch (err) {
        this.pending.delete(answer.id);
        call.reject(err as Error);
      }
      return;
    }
    this.pending.delete(answer.id);
    if (answer.missing) call.reject(new Error(`the prediction thread could not load version ${call.versionId}`));
    else if (answer.error !== undefined) call.reject(new Error(answer.error));
    else call.resolve(answer.result!);
  }

  /** Forgets the thread and what it held: its calls fail, the next call starts another. */
  private stopped(error: Error): void {
    this.worker = null;
    this.sent.clear();
    for (const call of this.pending.values()) call.reject(error);
    this.pending.clear();
  }
}
