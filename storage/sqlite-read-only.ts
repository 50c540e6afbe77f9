import { fork, type ChildProcess } from 'node:child_process';
import { datasetQueries, asSubquery, GovernedSqlUnavailableError, QueryRejectedError, QueryTimeoutError, typeFromValues, type ReadOnlyQuery, type ReadOnlyResult } from './read-only-query.ts';
import { quoteIdentifier } from './data-tables.ts';

interface Pending {
  resolve(result: ReadOnlyResult): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

interface Answer {
  id: number;
  names?: string[];
  rows?: unknown[][];
  numericTypes?: ('integer' | 'number' | null)[];
  truncated?: ReadOnlyResult['truncated'];
  error?: string;
  rejected?: boolean;
}

/**
 * Governed SQL on SQLite: one child process (sqlite-governed-process.mjs) with its own read-only
 * connection checks each statement's compiled program and runs it. A statement past its time limit
 * is stopped by killing that process (better-sqlite3 cannot interrupt a statement, and a worker
 * thread cannot be terminated while SQLite runs), and the next statement starts a fresh one.
 * Statements run one after another.
 */
export class SqliteReadOnlyRunner {
  private child: ChildProcess | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly file: string,
    private readonly physicalName: (orgId: number, table: string) => string,
  ) {}

  run(query: ReadOnlyQuery): Promise<ReadOnlyResult> {
    const result = this.queue.then(() => this.execute(query));
    this.queue = result.catch(() => undefined);
    return result;
  }

  /** Stops the statement running now: its process is killed, the statement fails. */
  cancelRunning(): void {
    this.stop(new GovernedSqlUnavailableError('the query was stopped: the platform is shutting down'));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.cancelRunning();
  }

  private execute(query: ReadOnlyQuery): Promise<ReadOnlyResult> {
    if (this.closed) return Promise.reject(new GovernedSqlUnavailableError('the platform is shutting down'));
    const child = this.ensureChild();
    const id = ++this.nextId;
    const table = (name: string) => this.physicalName(query.orgId, name);
    const sql = `${datasetQueries(query, (name) => quoteIdentifier(table(name)), true)}select * from ${asSubquery(query.sql)}`;
    const allowed = query.datasets.map((d) => ({ name: d.name, table: table(d.table), masked: d.columns.filter((c) => c.masked).map((c) => c.name), filtered: d.rowFilter !== null }));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.stop(new QueryTimeoutError(`the query ran longer than ${query.timeoutMs} ms and was stopped`)), query.timeoutMs);
      this.pending.set(id, {
        timer,
        reject,
        resolve: (result) => resolve(result),
      });
      child.send({ id, sql, params: query.params, limit: query.limit, maxBytes: query.maxBytes, allowed });
    });
  }

  /** Kills the process and fails what it was running with `reason`. */
  private stop(reason: Error): void {
    const child = this.child;
    this.child = null;
    child?.kill('SIGKILL');
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.reject(reason);
      this.pending.delete(id);
    }
  }

  private ensureChild(): ChildProcess {
    if (this.child) return this.child;
    const child = fork(new URL('./sqlite-governed-process.mjs', import.meta.url), [this.file], {
      // Plain JavaScript: none of the parent's loaders, and a heap of its own bounded.
      execArgv: ['--max-old-space-size=512'],
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    child.unref();
    child.channel?.unref();
    child.on('message', (message: Answer) => {
      const pending = this.pending.get(message.id);
      if (!pending) return;
      this.pending.delete(message.id);
      clearTimeout(pending.timer);
      if (message.error !== undefined) {
        pending.reject(message.rejected ? new QueryRejectedError(message.error) : new Error(message.error));
        return;
      }
      const rows = message.rows!;
      const type = (i: number) => message.numericTypes![i] ?? typeFromValues(rows.map((r) => r[i]));
      pending.resolve({ columns: message.names!.map((name, i) => ({ name, type: type(i) })), rows, truncated: message.truncated ?? null });
    });
    child.on('exit', (code, signal) => {
      if (this.child !== child) return; // stopped on purpose
      this.child = null;
      // Past its heap, or killed from outside: the statement asked more than governed SQL allows.
      this.stop(new QueryRejectedError(`the query process ended (${signal ?? `exit code ${code}`}): the query needs more memory than governed SQL allows`));
    });
    this.child = child;
    return child;
  }
}
