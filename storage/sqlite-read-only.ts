import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { quoteIdentifier } from './data-tables.ts';
import { asSubquery, datasetQueries, GovernedSqlUnavailableError, QueryRejectedError, QueryTimeoutError, typeFromValues, type ReadOnlyQuery, type ReadOnlyResult } from './read-only-query.ts';

/** Statements running at once, each in a process of its own. */
const PROCESSES = 2;
/** Statements of one organization waiting or running at once; past it a new one is refused. */
const PER_ORGANIZATION = 8;
/**
 * Memory a query process may take (RLIMIT_DATA, set by util-linux's prlimit where there is one):
 * SQLite's own allocations fail with "out of memory" past it, where neither SQLite's heap limit
 * (better-sqlite3 builds it without memory statistics) nor V8's heap limit would stop them.
 */
const PROCESS_MEMORY_BYTES = 1024 * 1024 * 1024;
const PRLIMIT = ['/usr/bin/prlimit', '/bin/prlimit'].find((file) => fs.existsSync(file));

interface Answer {
  names?: string[];
  rows?: unknown[][];
  numericTypes?: ('integer' | 'number' | null)[];
  truncated?: ReadOnlyResult['truncated'];
  error?: string;
  rejected?: boolean;
}

interface Job {
  orgId: number;
  message: Record<string, unknown>;
  resolve(result: ReadOnlyResult): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
  /** The process running it, once it runs. */
  runner?: QueryProcess;
}

interface QueryProcess {
  child: ChildProcess;
  job: Job | null;
}

/**
 * Governed SQL on SQLite: child processes (sqlite-governed-process.mjs), each with its own read-only
 * connection, check each statement's compiled program and run it. A statement past its time limit
 * (counted from its arrival, waiting included) is stopped by killing its process (better-sqlite3
 * cannot interrupt a statement, and a worker thread cannot be terminated while SQLite runs); a new
 * process takes its place. Organizations take turns, one statement each at a time, so one
 * organization's slow statements never hold up another's.
 */
export class SqliteReadOnlyRunner {
  private readonly processes: QueryProcess[] = [];
  /** Waiting statements per organization, in the order organizations get their turn. */
  private readonly waiting = new Map<number, Job[]>();
  private closed = false;

  constructor(
    private readonly file: string,
    private readonly physicalName: (orgId: number, table: string) => string,
  ) {}

  run(query: ReadOnlyQuery): Promise<ReadOnlyResult> {
    if (this.closed) return Promise.reject(new GovernedSqlUnavailableError('the platform is shutting down'));
    const pending = (this.waiting.get(query.orgId)?.length ?? 0) + this.processes.filter((p) => p.job?.orgId === query.orgId).length;
    if (pending >= PER_ORGANIZATION) return Promise.reject(new GovernedSqlUnavailableError(`this organization already has ${PER_ORGANIZATION} queries running or waiting; try again when one has ended`));
    return new Promise((resolve, reject) => {
      const job: Job = {
        orgId: query.orgId,
        message: this.message(query),
        resolve,
        reject,
        timer: setTimeout(() => this.fail(job, new QueryTimeoutError(`the query ran longer than ${query.timeoutMs} ms and was stopped`)), query.timeoutMs),
      };
      this.waiting.set(query.orgId, [...(this.waiting.get(query.orgId) ?? []), job]);
      this.dispatch();
    });
  }

  /** Stops every statement, running or waiting: each fails, their processes are killed. */
  cancelRunning(): void {
    const reason = new GovernedSqlUnavailableError('the query was stopped: the platform is shutting down');
    const stopped = [...this.waiting.values()].flat();
    this.waiting.clear();
    for (const runner of [...this.processes]) {
      if (runner.job) stopped.push(runner.job);
      this.kill(runner);
    }
    for (const job of stopped) {
      clearTimeout(job.timer);
      job.reject(reason);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.cancelRunning();
  }

  /** What the process is sent: the statement with its datasets' queries, and what it may read. */
  private message(query: ReadOnlyQuery): Record<string, unknown> {
    const table = (name: string) => this.physicalName(query.orgId, name);
    // Each row-filtered dataset's query is read once whatever the statement does, so its table is
    // read exactly once by it: a second read is the statement naming the table around the filter.
    const filtered = query.datasets.filter((d) => d.rowFilter !== null).map((d) => `(select count(*) from (select 1 from ${quoteIdentifier(d.name)} limit 1)) >= 0`);
    const sql = `${datasetQueries(query, (name) => quoteIdentifier(table(name)))}select * from ${asSubquery(query.sql)}${filtered.length ? ` where ${filtered.join(' and ')}` : ''}`;
    const allowed = query.datasets.map((d) => ({ name: d.name, table: table(d.table), masked: d.columns.filter((c) => c.masked).map((c) => c.name), filtered: d.rowFilter !== null }));
    return { sql, params: query.params, limit: query.limit, maxBytes: query.maxBytes, allowed };
  }

  /** Gives idle processes the next statements, one organization after another. */
  private dispatch(): void {
    for (const [orgId, jobs] of this.waiting) {
      if (this.processes.some((p) => p.job?.orgId === orgId)) continue;
      const runner = this.processes.find((p) => !p.job) ?? (this.processes.length < PROCESSES ? this.spawn() : undefined);
      if (!runner) return;
      const job = jobs.shift()!;
      // This organization's turn is taken: it goes last.
      this.waiting.delete(orgId);
      if (jobs.length) this.waiting.set(orgId, jobs);
      job.runner = runner;
      runner.job = job;
      // A process that died since sending its last answer fails the statement through 'exit' or 'error'.
      runner.child.send(job.message, (err) => err && this.lost(runner, new GovernedSqlUnavailableError(`the query process failed: ${err.message}`)));
    }
  }

  /** Ends a statement with an error; a running one's process is killed (and replaced on demand). */
  private fail(job: Job, err: Error): void {
    clearTimeout(job.timer);
    const queue = this.waiting.get(job.orgId);
    if (queue?.includes(job)) {
      const rest = queue.filter((j) => j !== job);
      if (rest.length) this.waiting.set(job.orgId, rest);
      else this.waiting.delete(job.orgId);
    }
    if (job.runner) this.kill(job.runner);
    job.reject(err);
    this.dispatch();
  }

  private kill(runner: QueryProcess): void {
    const at = this.processes.indexOf(runner);
    if (at >= 0) this.processes.splice(at, 1);
    runner.job = null;
    runner.child.kill('SIGKILL');
  }

  /** A process gone without being stopped: its statement fails with `reason`. */
  private lost(runner: QueryProcess, reason: Error): void {
    if (!this.processes.includes(runner)) return; // stopped on purpose
    const job = runner.job;
    this.kill(runner);
    if (job) this.fail(job, reason);
  }

  private spawn(): QueryProcess {
    // Plain JavaScript: none of the parent's loaders; its heap and its whole memory bounded.
    const node = ['--max-old-space-size=512'];
    const child = fork(new URL('./sqlite-governed-process.mjs', import.meta.url), [this.file], {
      ...(PRLIMIT ? { execPath: PRLIMIT, execArgv: [`--data=${PROCESS_MEMORY_BYTES}`, '--', process.execPath, ...node] } : { execArgv: node }),
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    child.unref();
    child.channel?.unref();
    const runner: QueryProcess = { child, job: null };
    child.on('message', (answer: Answer) => {
      const job = runner.job;
      if (!job) return;
      runner.job = null;
      clearTimeout(job.timer);
      if (answer.error !== undefined) job.reject(answer.rejected ? new QueryRejectedError(answer.error) : new Error(answer.error));
      else {
        const rows = answer.rows!;
        const type = (i: number) => answer.numericTypes![i] ?? typeFromValues(rows.map((r) => r[i]));
        job.resolve({ columns: answer.names!.map((name, i) => ({ name, type: type(i) })), rows, truncated: answer.truncated ?? null });
      }
      this.dispatch();
    });
    child.on('exit', (code, signal) => {
      // V8 aborts when its heap is full: the statement asked more than governed SQL allows.
      const outOfMemory = signal === 'SIGABRT' || code === 134;
      this.lost(runner, outOfMemory ? new QueryRejectedError('the query needs more memory than governed SQL allows') : new GovernedSqlUnavailableError(`the query process ended (${signal ?? `exit code ${code}`})`));
    });
    // A process that could not start, or whose channel broke: its statement fails, the next one gets a new process.
    child.on('error', (err) => this.lost(runner, new GovernedSqlUnavailableError(`the query process failed: ${err.message}`)));
    this.processes.push(runner);
    return runner;
  }
}
