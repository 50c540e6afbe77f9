/** A query run by the governed SQL path: one read-only statement, bounded in rows and time. */
export interface ReadOnlyQuery {
  sql: string;
  /** Values of `$1`, `$2`, … in order. */
  params: unknown[];
  /** At most this many rows come back; one more is read to tell whether the result was truncated. */
  limit: number;
  timeoutMs: number;
}

export interface ReadOnlyResult {
  columns: { name: string; type: string }[];
  rows: unknown[][];
  truncated: boolean;
}

/** The statement ran past its time limit and was stopped. */
export class QueryTimeoutError extends Error {}

/** The database refused the statement (syntax, unknown column, …): the caller's mistake. */
export class QueryRejectedError extends Error {}

/** The portable column type of a result column from its values (SQLite reports no types). */
export function typeFromValues(values: unknown[]): string {
  const present = values.filter((v) => v !== null && v !== undefined);
  if (present.length === 0) return 'unknown';
  if (present.every((v) => typeof v === 'number' && Number.isInteger(v)) || present.every((v) => typeof v === 'bigint')) return 'integer';
  if (present.every((v) => typeof v === 'number')) return 'number';
  if (present.every((v) => typeof v === 'boolean')) return 'boolean';
  return 'string';
}
