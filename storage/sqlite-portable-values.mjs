// Plain JavaScript so both the SQLite adapter's own connection (sqlite-values.ts) and its read
// workers (sqlite-read-worker.mjs, which run without the TypeScript loader) bind and read values alike.

/** A value as better-sqlite3 binds it: booleans as 1/0 and Dates as ISO strings (it binds neither). */
const bindable = (value) => (typeof value === 'boolean' ? (value ? 1 : 0) : value instanceof Date ? value.toISOString() : value);

/** Kysely passes the parameters as one array; direct callers may pass them one by one. */
export const bindAll = (params) => params.map((p) => (Array.isArray(p) ? p.map(bindable) : bindable(p)));

/** The positions and names of a statement's result columns declared `boolean` (SQLite stores them as 1/0). */
export function booleanColumns(statement) {
  return statement.reader ? statement.columns().flatMap((c, index) => (c.type?.toLowerCase() === 'boolean' ? [{ index, name: c.name }] : [])) : [];
}

/** true/false for a stored 1/0; anything else (null) as it is. */
export const asBoolean = (value) => (typeof value === 'number' ? value !== 0 : value);
