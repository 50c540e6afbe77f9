import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { ColumnStatistics } from './column-profile.ts';

/** Column types of dataset tables (issue: string, integer, number, boolean, date, timestamp, json). */
export const DATA_COLUMN_TYPES = ['string', 'integer', 'number', 'boolean', 'date', 'timestamp', 'json'] as const;
export type DataColumnType = (typeof DATA_COLUMN_TYPES)[number];

export interface DataColumn {
  name: string;
  type: DataColumnType;
}

/** Hidden surrogate key of every dataset table: stable order and cursor paging. */
export const ROW_ID = '_row_id';

/**
 * Dataset contents live in real tables, one per dataset, in a per-organization namespace: a schema
 * `org_<id>` on Postgres, a `org_<id>__` name prefix on SQLite (one file holds everything).
 */
export interface DataTables {
  /** The table as a SQL fragment (quoted, schema-qualified where the dialect has schemas). */
  ref(orgId: number, table: string): RawBuilder<unknown>;
  /** Creates the organization's namespace if needed (idempotent). */
  ensureNamespace(db: Kysely<any>, orgId: number): Promise<void>;
  create(db: Kysely<any>, orgId: number, table: string, columns: DataColumn[]): Promise<void>;
  drop(db: Kysely<any>, orgId: number, table: string): Promise<void>;
  /**
   * Drops a table nothing refers to any more (a dataset's replaced rows, an appended staging
   * table), outside any transaction (`db` is the storage's). SQLite frees a dropped table's pages
   * one by one, tens of ms for a million rows: there it is done by a connection of another process,
   * never on the event loop.
   */
  discard(db: Kysely<any>, orgId: number, table: string): Promise<void>;
  /**
   * Brings the planner's statistics of a table just filled up to date, so that its first queries
   * get the plan its data calls for (Postgres has none for a new table until autovacuum comes by,
   * and guesses: a lookup by an indexed column could scan the table in row order instead). SQLite
   * plans from its indexes alone: nothing to do there.
   */
  analyze(db: Kysely<any>, orgId: number, table: string): Promise<void>;
  /** Renames `from` to `to` within the organization's namespace. */
  rename(db: Kysely<any>, orgId: number, from: string, to: string): Promise<void>;
  /**
   * Creates, unless the table has it, the index `name` of `table` on `columns` (in this order).
   * Postgres builds it CONCURRENTLY, never blocking the table's writers, so `db` must not be a
   * transaction (give the storage's `db`); an instance already building it there makes this a
   * no-op. SQLite builds it in place (its one writer waits). An index of that name on another
   * table (the table a load replaced, renamed aside until it is dropped) or left invalid by a
   * failed build is dropped first.
   */
  index(db: Kysely<any>, orgId: number, table: string, name: string, columns: string[]): Promise<void>;
  /**
   * Opens a writer of rows (values in column order, already typed) into the table, in the fastest
   * way the dialect has: batches written one after another, the database storing one while the
   * next is prepared where it can.
   */
  openWriter(db: Kysely<any>, orgId: number, table: string, columns: DataColumn[]): Promise<RowWriter>;
  /**
   * Marks a table as in use by a load of this process until the returned function runs, so that
   * `dropUnclaimed`, run by any instance sharing the database, leaves it alone. Claim it before
   * creating it. Postgres: a session advisory lock, which dies with its process; SQLite: in this
   * process's memory (one process serves a SQLite file; several instances belong on Postgres).
   */
  claim(orgId: number, table: string): Promise<() => Promise<void>>;
  /**
   * Drops the tables, in every organization's namespace, whose name `isCandidate` accepts and that
   * no load claims: those a process killed mid-load left behind. Answers them as `org_<id>.<table>`.
   */
  dropUnclaimed(db: Kysely<any>, isCandidate: (table: string) => boolean): Promise<string[]>;
  /** Turns a stored value back into its API value (booleans, JSON and dates differ per dialect). */
  decode(type: DataColumnType, value: unknown): unknown;
  /**
   * The profile of each column (counts, distinct values, range, mean, standard deviation,
   * quartiles, top values, histogram; see `ColumnStatistics`) over the rows of `source` (a table
   * or a subquery), in as few reads of the rows as the dialect allows. Its statements go through
   * `db`, several at once: give it `Storage.longReads`.
   */
  profile(db: Kysely<any>, source: RawBuilder<unknown>, columns: DataColumn[]): Promise<ColumnStatistics[]>;
  /**
   * A condition true when `expression` (text) matches the regular expression `pattern` somewhere.
   * The flavour is the engine's: RE2 on SQLite (linear time, no backreferences or lookaround),
   * Postgres' POSIX regular expressions (`~`) on Postgres.
   */
  matches(expression: RawBuilder<unknown>, pattern: string): RawBuilder<boolean>;
  /**
   * `expression` converted to a column type, as the database converts (Postgres refuses a value
   * that does not convert; SQLite converts what it can, e.g. 'abc' as an integer is 0).
   */
  cast(expression: RawBuilder<unknown>, type: DataColumnType): RawBuilder<unknown>;
  /** The bytes of a value as text (0 for null), as the database counts them: for bounding a page of rows. */
  textBytes(expression: RawBuilder<unknown>): RawBuilder<number>;
  /**
   * Why the engine behind `matches` cannot compile `pattern` (its own message), or null when it can;
   * on Postgres the database compiles it, within `timeoutMs`.
   */
  patternError(db: Kysely<any>, pattern: string, timeoutMs: number): Promise<string | null>;
  /**
   * SQL text with the bound parameters written in as literals, for a fragment that must be spliced
   * into user-written SQL (whose own parameters keep their numbers).
   */
  inline(fragment: RawBuilder<unknown>, db: Kysely<any>): string;
  /** Largest number of bound parameters one statement may carry. */
  readonly maxParameters: number;
}

/** Rows going into one table: `end` once every batch is written, or `abort` to give up. */
export interface RowWriter {
  write(rows: unknown[][]): Promise<void>;
  /** Resolves once every row written is in the table. */
  end(): Promise<void>;
  /** Gives up; rows written so far may or may not be in the table (the caller drops it). */
  abort(): Promise<void>;
}

/** An identifier quoted for SQL text (both dialects quote with double quotes). */
export function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Rows per INSERT statement for `columns` columns under a dialect's parameter limit. */
export function batchSize(columns: number, maxParameters: number): number {
  return Math.max(1, Math.min(1000, Math.floor(maxParameters / Math.max(1, columns))));
}

/**
 * Writes parameters into compiled SQL as literals: placeholders are found outside quoted strings
 * and identifiers only. `placeholder` matches one placeholder at the start of the text and tells
 * which parameter it stands for; `literal` writes a value in the dialect.
 */
export function inlineParameters(compiledSql: string, parameters: readonly unknown[], placeholder: RegExp, literal: (value: unknown) => string): string {
  let out = '';
  let next = 0;
  for (let i = 0; i < compiledSql.length; i += 1) {
    const char = compiledSql[i];
    if (char === "'" || char === '"') {
      const end = compiledSql.indexOf(char, i + 1);
      out += compiledSql.slice(i, end + 1);
      i = end;
      continue;
    }
    const match = placeholder.exec(compiledSql.slice(i));
    if (match) {
      const index = match[1] ? Number(match[1]) - 1 : next++;
      out += literal(parameters[index]);
      i += match[0].length - 1;
      continue;
    }
    out += char;
  }
  return out;
}

/** A value as a SQL literal; `booleans` says how the dialect writes true and false. */
export function sqlLiteral(value: unknown, booleans: [string, string]): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'boolean') return value ? booleans[0] : booleans[1];
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Error('cannot write a non-finite number as a literal');
    return String(value);
  }
  return `'${String(value).replace(/'/g, "''")}'`;
}

export function insertStatement(target: RawBuilder<unknown>, columns: DataColumn[], rows: unknown[][], cast: (type: DataColumnType, value: unknown) => unknown) {
  const names = sql.join(columns.map((c) => sql.id(c.name)));
  const values = sql.join(rows.map((row) => sql`(${sql.join(row.map((value, i) => cast(columns[i].type, value)))})`));
  return sql`insert into ${target} (${names}) values ${values}`;
}
