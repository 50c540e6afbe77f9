import type { ColumnDataType, CompiledQuery, CreateTableBuilder, Kysely, SelectQueryBuilder, Transaction } from 'kysely';
import type { DataTables } from './data-tables.ts';
import type { ColumnBlock, LongReadOptions } from './long-reads.ts';
import type { DataColumn } from './data-tables.ts';
import type { GovernedDescribe, GovernedWrite, ReadOnlyQuery, ReadOnlyResult } from './read-only-query.ts';
import type { GovernedSelect } from './select-statement.ts';
import type { FullTextSearch } from './text-search.ts';

export interface StorageOptions {
  /** Key from which the adapter derives credentials it keeps (the passwords of governed SQL's roles). */
  secretKey?: string;
  /** Long reads (`longReads`) running at once: in all (READ_WORKERS), and of one organization. */
  readWorkers?: number;
  readWorkersPerOrganization?: number;
}

/**
 * Column types a migration uses for the portable kinds of data. Each adapter maps them to its
 * dialect (JSON is `jsonb` on Postgres and `text` on SQLite, timestamps `timestamptz` and ISO text).
 */
export interface PortableColumnTypes {
  readonly json: ColumnDataType;
  readonly timestamp: ColumnDataType;
  readonly text: ColumnDataType;
  readonly integer: ColumnDataType;
  readonly bigint: ColumnDataType;
  readonly boolean: ColumnDataType;
  readonly double: ColumnDataType;
}

/** A table whose changes bump a change counter; for updates, only changes of `columns` (all when absent). */
export interface TrackedTable {
  table: string;
  columns?: string[];
}

/** What one table looks like, enough to compare schemas before and after migrations. */
export interface TableSnapshot {
  name: string;
  /** `hasDefault`: the column has a default (on Postgres also: an identity or generated column). */
  columns: { name: string; type: string; nullable: boolean; hasDefault: boolean }[];
  indexes: string[];
}

/**
 * The one storage interface the kernel and plugins see. Nothing outside `storage/` learns which
 * database is behind it: dialect differences (JSON, identifiers, auto-increment ids, timestamps,
 * locks) are answered here.
 */
export interface Storage {
  /** Query builder speaking the configured dialect; RETURNING and ON CONFLICT work on both. */
  readonly db: Kysely<any>;
  readonly types: PortableColumnTypes;
  /** Human-readable target with any password removed, for logs. */
  readonly description: string;
  /** Adds an integer auto-increment primary key column named `id` (or `name`). */
  addIdColumn<TB extends string, C extends string>(table: CreateTableBuilder<TB, C>, name?: string): CreateTableBuilder<TB, C>;
  /** Makes a table append-only: the database itself refuses UPDATE and DELETE on it. */
  guardAppendOnly(db: Kysely<any>, table: string): Promise<void>;
  /** Removes what `guardAppendOnly` created (for a migration's down step). */
  unguardAppendOnly(db: Kysely<any>, table: string): Promise<void>;
  /**
   * Has the database bump the named change counter, inside the writing transaction, whenever rows
   * of the tracked tables change, whoever writes them (this instance, another one, a console). A
   * cache compares the counter with the value it was filled at to know whether it is still current.
   */
  trackChanges(db: Kysely<any>, counter: string, tables: TrackedTable[]): Promise<void>;
  /** Removes what `trackChanges` created (for a migration's down step). */
  untrackChanges(db: Kysely<any>, counter: string, tables: TrackedTable[]): Promise<void>;
  /**
   * The counter's value, counting every change this process committed before the call and every
   * change another process (an instance, a console) committed more than OTHER_PROCESS_LAG_MS (20 ms)
   * before it — on Postgres, while its LISTEN connection hears the counters' notices, every change
   * whose notice arrived before it (at most NOTICED_LAG_MS, 1 s, should a connection die silently).
   * Mostly a number kept in memory (no extra turn on the request path): read again after any write
   * of this process, and otherwise when the values may have moved (SQLite: a point read; Postgres:
   * one query for every counter, shared by the callers waiting for it).
   */
  changeCounter(counter: string): number | Promise<number>;
  /** Values for JSON columns: encode before writing, decode after reading. */
  encodeJson(value: unknown): unknown;
  decodeJson<T = unknown>(stored: unknown): T;
  /** Current time as the ISO-8601 UTC string every timestamp column stores and returns. */
  now(): string;
  transaction<T>(work: (trx: Transaction<any>) => Promise<T>): Promise<T>;
  /**
   * Inside a transaction: waits until no other transaction holds `key`, and holds it until this one
   * ends — for a check-then-write (a count against a cap) that must not interleave with another.
   */
  lockForTransaction(trx: Transaction<any>, key: string): Promise<void>;
  /**
   * Makes a SELECT in a transaction claim its rows: rows another transaction claimed are skipped,
   * and the ones returned stay claimed until this transaction ends (Postgres `FOR UPDATE SKIP
   * LOCKED`). SQLite has one writer, whose transactions never interleave: the query is unchanged.
   */
  skipLocked<Q extends SelectQueryBuilder<any, any, any>>(query: Q): Q;
  /**
   * Lets the transaction's commit answer before the database flushed it to disk (Postgres
   * `synchronous_commit = off`): a crash of the database server may lose it, never corrupt
   * anything. For bookkeeping that recovery redoes anyway (a lost claim expires and is claimed
   * again). SQLite's commits are already not flushed one by one (WAL, synchronous NORMAL).
   */
  commitLazily(trx: Transaction<any>): Promise<void>;
  /**
   * Wakes the listeners of `channel` on every instance sharing the database, once `db` (a
   * transaction, or the database for an immediate wake) commits. A wake carries no news: listeners
   * look again at what they watch. Postgres: NOTIFY; SQLite: this process's listeners.
   */
  notify(db: Kysely<any>, channel: string): Promise<void>;
  /** Calls `wake` whenever `channel` is notified (and after a lost connection is back); returns what stops it. */
  listen(channel: string, wake: () => void): Promise<() => Promise<void>>;
  /**
   * Runs `work` while holding the cluster-wide migration lock, so two instances starting together
   * against one Postgres never apply the same migration twice.
   */
  withMigrationLock<T>(work: () => Promise<T>): Promise<T>;
  /**
   * Tables (with columns and indexes) of the platform's own namespace, sorted by name; read through
   * `executor` when given (a transaction: its uncommitted schema changes included).
   */
  snapshotSchema(executor?: Kysely<any>): Promise<TableSnapshot[]>;
  /** Dataset tables: real tables in a per-organization namespace. */
  readonly dataTables: DataTables;
  /**
   * A query builder for reads that may take long (profiles, exports, pages of rows, quality runs),
   * made for organization `orgId`. SQLite: each statement runs in a worker thread on a read-only
   * connection of its own (WAL lets it read beside the writer), so the event loop keeps answering
   * other requests. Postgres: the pool's connections. At most `readWorkers` such statements run at
   * once and `readWorkersPerOrganization` of one organization; the others wait their turn,
   * organizations taking turns, so one tenant never takes every worker. Reads only (the SQLite
   * connections are read-only); a transaction on it is one snapshot of the data.
   */
  longReads(orgId: number, options?: LongReadOptions): Kysely<any>;
  /**
   * One statement of `longReads` (its turn, its timeout; on SQLite in a read worker) answering its
   * rows by column, without an object per row: far cheaper to hand on to another thread (a recipe
   * handler's input pages). Values as `longReads` answers them.
   */
  longReadColumns(orgId: number, query: CompiledQuery, options?: LongReadOptions): Promise<ColumnBlock>;
  /**
   * Reads user-written SQL as the database would: exactly one read-only SELECT, and the tables it
   * reads beyond its own WITH queries; anything else is a SelectRefusedError saying why. The first,
   * friendly refusal only: `runReadOnly` is the guard.
   */
  parseGovernedSelect(text: string): GovernedSelect | Promise<GovernedSelect>;
  /**
   * Runs one read-only statement written by a user (governed SQL) so that the database itself
   * lets it read only the datasets it names, as the caller may see them (Postgres: a role of the
   * organization; SQLite: the compiled statement is checked before it runs), bounded in rows,
   * bytes and time, off the request path: a runaway query is stopped and the server stays responsive.
   */
  runReadOnly(query: ReadOnlyQuery): Promise<ReadOnlyResult>;
  /**
   * Runs a governed statement (as `runReadOnly` would: only the datasets it names, as the caller
   * may see them, enforced by the database or the compiled program) and writes its rows into
   * `target` in the database: no row passes through this process. Off the event loop (SQLite: in a
   * process of its own, computing into a temporary table first so the database's single writer
   * lock is held only for the final copy), stopped by its timeout or its signal on both adapters.
   * All or nothing: a failed or stopped statement leaves `target` as it was. Answers the rows written.
   */
  writeGoverned(write: GovernedWrite): Promise<{ rows: number }>;
  /**
   * The result columns of a governed statement and their platform types, without running it
   * (Postgres: the database's result types; SQLite: the type of the dataset column a result
   * column reads straight from, else judged from the first rows' values, else `string`).
   */
  describeGoverned(query: GovernedDescribe): Promise<DataColumn[]>;
  /**
   * Governed SQL text (this database's dialect) for the seconds from the time `earlier` to the time
   * `later`, two expressions of `date` or `timestamp` columns, as a fractional number: what a
   * statement a plugin writes for governed SQL needs where the dialects differ.
   */
  secondsBetweenSql(earlier: string, later: string): string;
  /** Full-text search over a text column of a plugin's table, with the database's own engine (FTS5 and BM25; tsvector and ts_rank_cd). */
  readonly fullText: FullTextSearch;
  /**
   * The statements an administrator runs so that governed SQL works where the platform's database
   * user may not create its roles (Postgres without CREATEROLE): one per organization. None on SQLite.
   */
  governedSqlRoleStatements(orgIds: number[]): Promise<string[]>;
  /** True when `err` is the database refusing a duplicate of a unique key. */
  isUniqueViolation(err: unknown): boolean;
  /**
   * True when `err` says the connection to the database was lost or could not be opened (a backend
   * terminated by an administrator, a failover, a restart): the request may succeed when retried.
   */
  isConnectionLost(err: unknown): boolean;
  /** Cheap round trip used by /readyz. */
  ping(): Promise<void>;
  /**
   * Stops the statements running right now, at shutdown once the drain time is over: each fails as
   * the platform shutting down (`isConnectionLost` is true of its error: a 503) and its connection
   * goes back to the pool. New statements still run until `close`.
   */
  cancelRunning(): Promise<void>;
  /** Stops what still runs (as `cancelRunning`), then closes every connection. */
  close(): Promise<void>;
}
