import { quoteIdentifier, sqlLiteral, type DataColumn } from './data-tables.ts';

/** One dataset a governed statement reads, as the caller may see it. */
export interface GovernedDataset {
  /** The name the statement reads it by: a query of that name is placed before the statement. */
  name: string;
  /** The dataset's table within the organization's namespace (`ds_<id>`). */
  table: string;
  /**
   * Every column in table order; a `masked` one reads as `mask` and its values are never read.
   * `type` (when given) lets `describeGoverned` type a result column read straight from it.
   */
  columns: { name: string; masked: boolean; type?: DataColumn['type'] }[];
  /** The caller's row-policy condition as SQL text with literals, or null for every row. */
  rowFilter: string | null;
  /**
   * Its table does not have `columns` yet (a recipe's output never written, taken with the columns
   * its producer would write): it reads as no rows of those columns, each a null of its `type`, so
   * a statement over it can be described before it is built.
   */
  unbuilt?: boolean;
}

/**
 * A statement written by a user (governed SQL): one read-only SELECT over datasets of one
 * organization, bounded in rows, bytes and time. The adapter runs it with only that
 * organization's datasets reachable, whatever the text says.
 */
export interface ReadOnlyQuery {
  /** The statement as checked by `parseGovernedSelect` (no trailing semicolon). */
  sql: string;
  /** Values of `$1`, `$2`, … in order. */
  params: unknown[];
  orgId: number;
  /** The datasets the statement names, each readable only as described. */
  datasets: GovernedDataset[];
  /** Text a masked value reads as. */
  mask: string;
  /** At most this many rows come back; one more is read to tell whether the result was truncated. */
  limit: number;
  /** At most about this many bytes of values come back; past it the result is truncated. */
  maxBytes: number;
  timeoutMs: number;
}

/**
 * A governed statement whose rows are written into a table instead of answered (a recipe's
 * `INSERT … SELECT`): read under the same rules as `ReadOnlyQuery`, written only into `target`.
 */
export interface GovernedWrite extends Omit<ReadOnlyQuery, 'limit' | 'maxBytes'> {
  /** An existing, empty table of the organization's namespace (its name there, e.g. `ds_7_run_…`). */
  target: string;
  /** The target's columns, matched to the statement's result columns by position; each value is converted to its column's type. */
  columns: DataColumn[];
  /** Aborting stops the running statement (the write is rolled back) and fails with the signal's reason. */
  signal?: AbortSignal;
}

/** The statement of a `GovernedWrite`, described without being run (`limit`, `maxBytes`, `target`, `columns` unused). */
export type GovernedDescribe = Omit<ReadOnlyQuery, 'limit' | 'maxBytes'>;

export interface ReadOnlyResult {
  columns: { name: string; type: string }[];
  rows: unknown[][];
  /** Null when every row came back; otherwise which bound stopped it. */
  truncated: 'row_limit' | 'byte_limit' | null;
}

/** The statement ran past its time limit and was stopped. */
export class QueryTimeoutError extends Error {}

/** The database (or its compiled plan) refused the statement: the caller's mistake, with a message saying why. */
export class QueryRejectedError extends Error {}

/**
 * Governed SQL cannot run here now (e.g. the database user may not create the roles it runs
 * under); not the caller's fault.
 */
export class GovernedSqlUnavailableError extends Error {}

/** The portable column type of a result column from its values (SQLite reports no types). */
export function typeFromValues(values: unknown[]): string {
  const present = values.filter((v) => v !== null && v !== undefined);
  if (present.length === 0) return 'unknown';
  if (present.every((v) => typeof v === 'number' && Number.isInteger(v)) || present.every((v) => typeof v === 'bigint')) return 'integer';
  if (present.every((v) => typeof v === 'number')) return 'number';
  if (present.every((v) => typeof v === 'boolean')) return 'boolean';
  return 'string';
}

/**
 * The WITH clause placed before a governed statement: one query per dataset it reads, named as the
 * statement names it, reading only what the caller may see of the table. A dataset with a row
 * filter is MATERIALIZED: computed on its own, so no condition of the statement is evaluated on a
 * row the filter drops (Postgres would otherwise merge the statement's conditions into the scan and
 * may evaluate the cheaper ones first, letting an error message show a hidden value), and read once,
 * so that a compiled program reading its table a second time shows a read around the filter.
 */
export function datasetQueries(query: Pick<ReadOnlyQuery, 'datasets' | 'mask'>, tableRef: (table: string, rowFiltered: boolean) => string, columnType: (type: DataColumn['type']) => string): string {
  if (!query.datasets.length) return '';
  const queries = query.datasets.map((dataset) => {
    const columns = dataset.columns.map((c) => {
      if (dataset.unbuilt) return `cast(null as ${columnType(c.type ?? 'string')}) as ${quoteIdentifier(c.name)}`;
      return c.masked ? `cast(${sqlLiteral(query.mask, ['true', 'false'])} as text) as ${quoteIdentifier(c.name)}` : quoteIdentifier(c.name);
    });
    const where = [columns.length && !dataset.unbuilt ? null : '1 = 0', dataset.rowFilter].filter(Boolean);
    const materialized = dataset.rowFilter ? 'materialized ' : '';
    return `${quoteIdentifier(dataset.name)} as ${materialized}(select ${columns.length ? columns.join(', ') : 'null as no_columns'} from ${tableRef(dataset.table, Boolean(dataset.rowFilter))}${where.length ? ` where ${where.join(' and ')}` : ''})`;
  });
  return `with ${queries.join(', ')} `;
}

/**
 * The statement as a subquery named `governed_query`. What follows the statement cannot be
 * commented out by it: a line break ends a trailing `--` comment, and `/**\/` ends a `/*` left open
 * (SQLite reads an unclosed comment to the end of the text, which would swallow the rest).
 */
export const asSubquery = (statement: string) => `(\n${statement}\n/**/) as governed_query`;

/**
 * Refuses a statement with a NUL character: both databases read their text only up to the first
 * one, so what follows it (the end of `asSubquery`, a byte check) would silently not be there.
 */
export function refuseNul(sql: string): void {
  if (sql.includes('\0')) throw new QueryRejectedError('the query contains a NUL character');
}

/** What a statement stopped by its signal fails with: the signal's reason when it is an error. */
export function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('the statement was cancelled');
}
