import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { quoteIdentifier, type DataColumn, type DataColumnType } from './data-tables.ts';
import { SQLITE_TYPES } from './data-tables-sqlite.ts';
import { BACKGROUND_NICENESS } from './thread-priority.mjs';
import {
  abortReason,
  asSubquery,
  datasetQueries,
  GovernedSqlUnavailableError,
  QueryRejectedError,
  QueryTimeoutError,
  refuseNul,
  typeFromValues,
  type GovernedDescribe,
  type GovernedWrite,
  type ReadOnlyQuery,
  type ReadOnlyResult,
} from './read-only-query.ts';

/** How long dropping a table may take (waiting for a process included). */
const DROP_TIMEOUT_MS = 120_000;
/** Statements running at once of each kind (reads, writes), each in a process of its own. */
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

/**
 * The two kinds of process: reads (and descriptions) on a read-only connection, writes of a result
 * into a table on a read-write one. Separate pools, so that no read ever runs on a connection that
 * could write.
 */
const SCRIPTS = { read: './sqlite-governed-process.mjs', write: './sqlite-governed-write-process.mjs' } as const;
type Kind = keyof typeof SCRIPTS;

interface Answer {
  names?: string[];
  rows?: unknown[][];
  numericTypes?: ('integer' | 'number' | null)[];
  truncated?: ReadOnlyResult['truncated'];
  /** A description's: where each result column reads straight from a table column. */
  origins?: ({ table: string; column: string; declared: string | null } | null)[];
  /** A write's: the rows inserted. */
  written?: number;
  error?: string;
  rejected?: boolean;
}

interface Job {
  orgId: number;
  kind: Kind;
  message: Record<string, unknown>;
  resolve(answer: Answer): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
  /** The process running it, once it runs. */
  runner?: QueryProcess;
}

interface QueryProcess {
  kind: Kind;
  child: ChildProcess;
  job: Job | null;
}

/**
 * Governed SQL on SQLite: child processes, each with its own connection, check each statement's
 * compiled program and run it (sqlite-governed-process.mjs reads, sqlite-governed-write-process.mjs
 * writes a result into a table). A statement past its time limit (counted from its arrival,
 * waiting included) or whose signal aborts is stopped by killing its process (better-sqlite3
 * cannot interrupt a statement, and a worker thread cannot be terminated while SQLite runs); a new
 * process takes its place. Organizations take turns, one statement each at a time, so one
 * organization's slow statements never hold up another's.
 */
export class SqliteGovernedRunner {
  private readonly processes: QueryProcess[] = [];
  /** Waiting statements per organization, in the order organizations get their turn. */
  private readonly waiting = new Map<number, Job[]>();
  private closed = false;

  constructor(
    private readonly file: string,
    private readonly physicalName: (orgId: number, table: string) => string,
  ) {}

  async run(query: ReadOnlyQuery): Promise<ReadOnlyResult> {
    const answer = await this.submit(query, 'read', { ...this.statement(query), limit: query.limit, maxBytes: query.maxBytes });
    return { columns: answer.names!.map((name, i) => ({ name, type: judgedType(answer, i) })), rows: answer.rows!, truncated: answer.truncated ?? null };
  }

  /** The result written into the target in the write process; a kill before its commit leaves the target as it was. */
  async write(write: GovernedWrite): Promise<{ rows: number }> {
    refuseNul(write.sql);
    const message = { ...this.statement(write), target: this.physicalName(write.orgId, write.target), columns: write.columns.map((c) => c.name) };
    return { rows: (await this.submit(write, 'write', message, write.signal)).written! };
  }

  /**
   * Each result column with the type of the dataset column it reads straight from, else judged
   * from the first rows' values (0 and 1 from a column declared boolean are booleans), else `string`.
   */
  async describe(query: GovernedDescribe): Promise<DataColumn[]> {
    refuseNul(query.sql);
    const answer = await this.submit(query, 'read', { ...this.statement(query), describe: true });
    const types = new Map(query.datasets.map((d) => [this.physicalName(query.orgId, d.table), new Map(d.columns.map((c) => [c.name, c.type]))]));
    return answer.names!.map((name, i) => {
      const origin = answer.origins![i];
      const declared = origin && types.get(origin.table)?.get(origin.column);
      if (declared) return { name, type: declared };
      const values = answer.rows!.map((row) => row[i]);
      const booleans = origin?.declared?.toLowerCase() === 'boolean' && values.every((v) => v === null || v === 0 || v === 1);
      const judged = booleans ? 'boolean' : judgedType(answer, i);
      return { name, type: (judged === 'unknown' ? 'string' : judged) as DataColumnType };
    });
  }

  /**
   * Drops a table of the organization's (its physical name) in a write process: a big table's
   * pages are freed there, not on the event loop. Waits its turn like a statement.
   */
  async drop(orgId: number, physicalName: string): Promise<void> {
    await this.submit({ orgId, timeoutMs: DROP_TIMEOUT_MS }, 'write', { drop: physicalName });
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

  /** What a process is sent of any statement: the statement with its datasets' queries, and what it may read. */
  private statement(query: GovernedDescribe): Record<string, unknown> {
    const table = (name: string) => this.physicalName(query.orgId, name);
    // Each row-filtered dataset's query is read once whatever the statement does, so its table is
    // read exactly once by it: a second read is the statement naming the table around the filter.
    // That query reads the table NOT INDEXED (one cursor on it, whatever indexes it has, a lookup's
    // say): an index of it opened by the statement counts as a second read.
    const filtered = query.datasets.filter((d) => d.rowFilter !== null).map((d) => `(select count(*) from (select 1 from ${quoteIdentifier(d.name)} limit 1)) >= 0`);
    const sql = `${datasetQueries(query, (name, rowFiltered) => `${quoteIdentifier(table(name))}${rowFiltered ? ' not indexed' : ''}`, (type) => SQLITE_TYPES[type])}select * from ${asSubquery(query.sql)}${filtered.length ? ` where ${filtered.join(' and ')}` : ''}`;
    const allowed = query.datasets.map((d) => ({ name: d.name, table: table(d.table), masked: d.columns.filter((c) => c.masked).map((c) => c.name), filtered: d.rowFilter !== null }));
    return { sql, params: query.params, allowed };
  }

  /** Queues a statement for a process of `kind`; it fails past its time limit, or when `signal` aborts. */
  private submit(query: Pick<GovernedDescribe, 'orgId' | 'timeoutMs'>, kind: Kind, message: Record<string, unknown>, signal?: AbortSignal): Promise<Answer> {
    if (this.closed) return Promise.reject(new GovernedSqlUnavailableError('the platform is shutting down'));
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const pending = (this.waiting.get(query.orgId)?.length ?? 0) + this.processes.filter((p) => p.job?.orgId === query.orgId).length;
    if (pending >= PER_ORGANIZATION) return Promise.reject(new GovernedSqlUnavailableError(`this organization already has ${PER_ORGANIZATION} queries running or waiting; try again when one has ended`));
    return new Promise<Answer>((resolve, reject) => {
      const abort = () => this.fail(job, abortReason(signal!));
      const settled = <T>(settle: (value: T) => void) => (value: T) => {
        signal?.removeEventListener('abort', abort);
        settle(value);
      };
      const job: Job = {
        orgId: query.orgId,
        kind,
        message,
        resolve: settled(resolve),
        reject: settled(reject),
        timer: setTimeout(() => this.fail(job, new QueryTimeoutError(`the query ran longer than ${query.timeoutMs} ms and was stopped`)), query.timeoutMs),
      };
      signal?.addEventListener('abort', abort, { once: true });
      this.waiting.set(query.orgId, [...(this.waiting.get(query.orgId) ?? []), job]);
      this.dispatch();
    });
  }

  /** Gives idle processes the next statements, one organization after another. */
  private dispatch(): void {
    for (const [orgId, jobs] of this.waiting) {
      if (this.processes.some((p) => p.job?.orgId === orgId)) continue;
      const { kind } = jobs[0];
      const runner = this.processes.find((p) => !p.job && p.kind === kind) ?? (this.processes.filter((p) => p.kind === kind).length < PROCESSES ? this.spawn(kind) : undefined);
      if (!runner) continue; // every process of its kind is busy: the next organization's may be of the other
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

  private spawn(kind: Kind): QueryProcess {
    // Plain JavaScript: none of the parent's loaders; its heap and its whole memory bounded.
    const node = ['--max-old-space-size=512'];
    const child = fork(new URL(SCRIPTS[kind], import.meta.url), [this.file], {
      ...(PRLIMIT ? { execPath: PRLIMIT, execArgv: [`--data=${PROCESS_MEMORY_BYTES}`, '--', process.execPath, ...node] } : { execArgv: node }),
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    child.unref();
    child.channel?.unref();
    lowerPriority(child);
    const runner: QueryProcess = { kind, child, job: null };
    child.on('message', (answer: Answer) => {
      const job = runner.job;
      if (!job) return;
      runner.job = null;
      clearTimeout(job.timer);
      if (answer.error !== undefined) job.reject(answer.rejected ? new QueryRejectedError(answer.error) : new Error(answer.error));
      else job.resolve(answer);
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

/** A result column's type: numeric as the process counted its values, else judged by them. */
function judgedType(answer: Answer, i: number): string {
  return answer.numericTypes![i] ?? typeFromValues(answer.rows!.map((r) => r[i]));
}

/** When the CPU is short, the server's event loop is served before a query process (as before the read threads). */
function lowerPriority(child: ChildProcess): void {
  try {
    if (child.pid !== undefined) os.setPriority(child.pid, BACKGROUND_NICENESS);
  } catch {
    // not allowed here: the default priority
  }
}
