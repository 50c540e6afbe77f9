import { Worker } from 'node:worker_threads';

/** How often the WAL is checkpointed. */
const CHECKPOINT_INTERVAL_MS = 500;

/**
 * Checkpoints of a SQLite file in a thread of their own. By default SQLite checkpoints in whichever
 * connection commits once the WAL passes 1000 pages, synchronously: after a recipe's process wrote
 * a million rows, the next commit of the server's own connection copied them back into the file
 * on the event loop (requests stalled for up to ~200 ms). Every connection that writes turns
 * automatic checkpoints off (`wal_autocheckpoint = 0`) and this thread does them all.
 */
export class SqliteCheckpointer {
  private readonly thread: Worker;

  constructor(file: string) {
    this.thread = new Worker(new URL('./sqlite-checkpoint-worker.mjs', import.meta.url), {
      workerData: { file, intervalMs: CHECKPOINT_INTERVAL_MS },
      // Plain JavaScript: none of the parent's loaders.
      execArgv: [],
    });
    // It must never keep the process alive, nor take it down: a checkpoint missed is done at the next tick or start.
    this.thread.unref();
    this.thread.on('error', () => undefined);
  }

  async close(): Promise<void> {
    await this.thread.terminate();
  }
}
