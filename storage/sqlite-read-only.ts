import { Worker } from 'node:worker_threads';
import { QueryRejectedError, QueryTimeoutError, typeFromValues, type ReadOnlyQuery, type ReadOnlyResult } from './read-only-query.ts';

interface Pending {
  resolve(result: ReadOnlyResult): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
  limit: number;
}

/**
 * Governed SQL on SQLite: one worker thread with its own read-only connection. A query past its
 * time limit terminates the worker (SQLite cannot be interrupted from another thread here), and
 * the next query starts a fresh one. Queries run one after another.
 */
export class SqliteReadOnlyRunner {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly file: string) {}

  run(query: ReadOnlyQuery): Promise<ReadOnlyResult> {
    const result = this.queue.then(() => this.execute(query));
    this.queue = result.catch(() => undefined);
    return result;
  }

  async close(): Promise<void> {
    await this.worker?.terminate();
    this.worker = null;
  }

  private execute(query: ReadOnlyQuery): Promise<ReadOnlyResult> {
    const worker = this.ensureWorker();
    const id = ++this.nextId;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        this.worker = null;
        void worker.terminate();
        reject(new QueryTimeoutError(`the query ran longer than ${query.timeoutMs} ms and was stopped`));
      }, query.timeoutMs);
      this.pending.set(id, { resolve, reject, timer, limit: query.limit });
      worker.postMessage({ id, sql: query.sql, params: query.params, limit: query.limit });
    });
  }

  private ensureWorker(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(new URL('./sqlite-query-worker.mjs', import.meta.url), { workerData: { file: this.file } });
    worker.unref();
    worker.on('message', (message: { id: number; names?: string[]; rows?: unknown[][]; numericTypes?: ('integer' | 'number' | null)[]; error?: string; rejected?: boolean }) => {
      const pending = this.pending.get(message.id);
      if (!pending) return;
      this.pending.delete(message.id);
      clearTimeout(pending.timer);
      if (message.error !== undefined) {
        pending.reject(message.rejected ? new QueryRejectedError(message.error) : new Error(message.error));
        return;
      }
      const rows = message.rows!;
      const truncated = rows.length > pending.limit;
      const kept = truncated ? rows.slice(0, pending.limit) : rows;
      const type = (i: number) => message.numericTypes![i] ?? typeFromValues(kept.map((r) => r[i]));
      pending.resolve({ columns: message.names!.map((name, i) => ({ name, type: type(i) })), rows: kept, truncated });
    });
    worker.on('error', (err) => {
      for (const [id, pending] of this.pending) {
        clearTimeout(pending.timer);
        pending.reject(err);
        this.pending.delete(id);
      }
      this.worker = null;
    });
    this.worker = worker;
    return worker;
  }
}
