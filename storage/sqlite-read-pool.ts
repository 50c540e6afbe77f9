import { Worker } from 'node:worker_threads';
import { CompiledQuery, type DatabaseConnection, type Driver, type QueryResult } from 'kysely';
import { LongReadStoppedError, type ColumnBlock } from './long-reads.ts';
import { QueryTimeoutError } from './read-only-query.ts';
import { rowFromValues } from './row-objects.mjs';

/** How long a read waits on a lock (a checkpoint truncating the WAL) before failing. */
const BUSY_TIMEOUT_MS = 5000;

/** A worker's answer: rows as arrays, or (asked `columnWise`) `values` by column and their `count`. */
interface Answer {
  columns: string[];
  rows?: unknown[][];
  values?: unknown[][];
  count?: number;
  changes?: number;
  error?: { message: string; code?: string };
}

interface Running {
  resolve(answer: Answer): void;
  reject(err: Error): void;
  timer?: NodeJS.Timeout;
}

type RowMaker = (values: unknown[]) => Record<string, unknown>;

/** Row makers by column list (see row-objects.mjs), kept: a page of rows is the same statement page after page. */
const rowMakers = new Map<string, RowMaker>();
const ROW_MAKERS_KEPT = 200;

function rowMaker(columns: string[]): RowMaker {
  const key = columns.join('\u0000');
  let make = rowMakers.get(key);
  if (!make) {
    make = rowFromValues(columns);
    if (rowMakers.size >= ROW_MAKERS_KEPT) rowMakers.delete(rowMakers.keys().next().value!);
    rowMakers.set(key, make);
  }
  return make;
}

/** A worker thread (sqlite-read-worker.mjs) with its read-only connection: one statement at a time. */
class ReadWorker {
  private readonly thread: Worker;
  private running: Running | null = null;
  /** False once stopped or gone: it runs nothing more. */
  alive = true;

  constructor(file: string) {
    this.thread = new Worker(new URL('./sqlite-read-worker.mjs', import.meta.url), {
      workerData: { file, busyTimeoutMs: BUSY_TIMEOUT_MS },
      // Plain JavaScript: none of the parent's loaders.
      execArgv: [],
    });
    // An idle worker must not keep the process alive; a busy one does (see `run`).
    this.thread.unref();
    this.thread.on('message', (answer: Answer) => {
      if (answer.error) this.settle(null, Object.assign(new Error(answer.error.message), { code: answer.error.code }));
      else this.settle(answer);
    });
    this.thread.on('error', (err) => this.stop(err));
    this.thread.on('exit', (code) => this.stop(new Error(`the read worker ended (exit code ${code})`)));
  }

  async run(query: CompiledQuery, timeoutMs: number | undefined): Promise<QueryResult<unknown>> {
    const answer = await this.ask(query, timeoutMs, false);
    return { rows: answer.rows!.map(rowMaker(answer.columns)), ...(answer.changes === undefined ? {} : { numAffectedRows: BigInt(answer.changes) }) };
  }

  async columns(query: CompiledQuery, timeoutMs: number | undefined): Promise<ColumnBlock> {
    const answer = await this.ask(query, timeoutMs, true);
    return { columns: answer.columns, values: answer.values ?? answer.columns.map(() => []), rows: answer.count ?? 0 };
  }

  private ask({ sql, parameters }: CompiledQuery, timeoutMs: number | undefined, columnWise: boolean): Promise<Answer> {
    if (!this.alive) return Promise.reject(new LongReadStoppedError('the read worker was stopped'));
    return new Promise((resolve, reject) => {
      this.running = { resolve, reject };
      this.thread.ref();
      if (timeoutMs !== undefined) {
        this.running.timer = setTimeout(() => this.stop(new QueryTimeoutError(`the query ran longer than ${timeoutMs} ms and was stopped`)), timeoutMs);
      }
      this.thread.postMessage({ sql, parameters, columnWise });
    });
  }

  /**
   * Fails the running statement with `reason` and ends the thread. better-sqlite3 cannot interrupt
   * a statement, so the thread ends once SQLite hands control back (at the latest when the
   * statement ends); its caller has its answer at once and the pool starts a new worker.
   */
  stop(reason: Error): void {
    this.alive = false;
    this.settle(null, reason);
    void this.thread.terminate();
  }

  private settle(result: Answer | null, err?: Error): void {
    const running = this.running;
    if (!running) return;
    this.running = null;
    this.thread.unref();
    clearTimeout(running.timer);
    if (err) running.reject(err);
    else running.resolve(result!);
  }
}

/**
 * The SQLite adapter's read workers: threads each holding a read-only connection to the database
 * file, started when first needed and kept while idle. Which statement gets a worker, and how many
 * are out at once, is for the turns (`withTurns`) around the driver: this pool hands out a worker
 * whenever asked, so it never holds more than the turns allow.
 */
export class SqliteReadPool {
  private readonly idle: ReadWorker[] = [];
  private readonly busy = new Set<ReadWorker>();
  private closed = false;

  constructor(private readonly file: string) {}

  /** A driver whose connections are workers, each statement stopped past `timeoutMs`. Reads only. */
  driver(timeoutMs: number | undefined): Driver {
    const workers = new WeakMap<DatabaseConnection, ReadWorker>();
    const run = (connection: DatabaseConnection, sql: string) => workers.get(connection)!.run(CompiledQuery.raw(sql), timeoutMs);
    return {
      init: async () => undefined,
      acquireConnection: async () => {
        const worker = this.acquire();
        const connection: DatabaseConnection = {
          executeQuery: <R>(query: CompiledQuery) => worker.run(query, timeoutMs) as Promise<QueryResult<R>>,
          streamQuery: async function* () {
            throw new Error('long reads are read a page at a time, not streamed');
          },
        };
        workers.set(connection, worker);
        return connection;
      },
      // A read transaction: its statements see one snapshot of the database.
      beginTransaction: async (connection) => void (await run(connection, 'begin')),
      commitTransaction: async (connection) => void (await run(connection, 'commit')),
      rollbackTransaction: async (connection) => void (await run(connection, 'rollback')),
      releaseConnection: async (connection) => this.release(workers.get(connection)!),
      destroy: async () => undefined,
    };
  }

  /** One statement answered by column, on a worker of its own (the caller holds its turn). Reads only. */
  async columns(query: CompiledQuery, timeoutMs: number | undefined): Promise<ColumnBlock> {
    const worker = this.acquire();
    try {
      return await worker.columns(query, timeoutMs);
    } finally {
      this.release(worker);
    }
  }

  /** Stops every running statement: each fails with a LongReadStoppedError, its worker ends. */
  cancelRunning(): void {
    for (const worker of this.busy) worker.stop(new LongReadStoppedError('the query was stopped: the platform is shutting down'));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.cancelRunning();
    for (const worker of this.idle.splice(0)) worker.stop(new LongReadStoppedError('the platform is shutting down'));
  }

  private acquire(): ReadWorker {
    if (this.closed) throw new LongReadStoppedError('the platform is shutting down');
    let worker = this.idle.pop();
    while (worker && !worker.alive) worker = this.idle.pop();
    worker ??= new ReadWorker(this.file);
    this.busy.add(worker);
    return worker;
  }

  private release(worker: ReadWorker): void {
    this.busy.delete(worker);
    if (worker.alive && !this.closed) this.idle.push(worker);
  }
}
