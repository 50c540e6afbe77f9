import type Database from 'better-sqlite3';
import { sql } from 'kysely';
import { ROW_ID, inlineParameters, quoteIdentifier as quote, sqlLiteral, type DataColumn, type DataColumnType, type DataTables } from './data-tables.ts';

const SQLITE_TYPES: Record<DataColumnType, string> = {
  string: 'text',
  integer: 'integer',
  number: 'real',
  boolean: 'boolean',
  date: 'text',
  timestamp: 'text',
  json: 'text',
};

const physical = (orgId: number, table: string) => `org_${orgId}__${table}`;

/**
 * SQLite: one file, so an organization's tables share a name prefix instead of a schema. Rows are
 * inserted through the driver directly: one prepared statement re-run per row inside a transaction
 * per batch is far cheaper than building multi-row INSERT texts (the connection is the one the
 * query builder uses, so this joins any transaction in progress).
 */
export const createSqliteDataTables = (database: Database.Database): DataTables => ({
  maxParameters: 30_000,
  ref: (orgId, table) => sql.id(physical(orgId, table)),
  async ensureNamespace() {},
  async create(db, orgId, table, columns) {
    const definitions = [sql`${sql.id(ROW_ID)} integer primary key autoincrement`, ...columns.map((c) => sql`${sql.id(c.name)} ${sql.raw(SQLITE_TYPES[c.type])}`)];
    await sql`create table ${sql.id(physical(orgId, table))} (${sql.join(definitions)})`.execute(db);
  },
  async drop(db, orgId, table) {
    await sql`drop table if exists ${sql.id(physical(orgId, table))}`.execute(db);
  },
  async rename(db, orgId, from, to) {
    await sql`alter table ${sql.id(physical(orgId, from))} rename to ${sql.id(physical(orgId, to))}`.execute(db);
  },
  async openWriter(_db, orgId, table, columns) {
    const insert = database.prepare(
      `insert into ${quote(physical(orgId, table))} (${columns.map((c) => quote(c.name)).join(', ')}) values (${columns.map(() => '?').join(', ')})`,
    );
    const encoders = columns.map(encoderFor);
    const values: unknown[] = new Array(columns.length); // one array bound row after row
    const insertAll = (rows: unknown[][]) => {
      for (const row of rows) {
        for (let i = 0; i < values.length; i += 1) values[i] = encoders[i](row[i]);
        insert.run(values);
      }
    };
    // A transaction per batch, so other writers get their turn between batches.
    const write = database.transaction(insertAll);
    return {
      write: async (rows) => (database.inTransaction ? insertAll(rows) : write(rows)),
      end: async () => undefined,
      abort: async () => undefined,
    };
  },
  inline: (fragment, db) => {
    const compiled = fragment.compile(db);
    return inlineParameters(compiled.sql, compiled.parameters, /^\?/, (value) => sqlLiteral(value, ['1', '0']));
  },
  // `regexp` is registered on the connection by the SQLite adapter (JavaScript regular expressions).
  matches: (expression, pattern) => sql<boolean>`regexp(${pattern}, ${expression})`,
  decode(type, value) {
    if (value === null || value === undefined) return null;
    if (type === 'json') return JSON.parse(value as string);
    if (type === 'boolean') return value === 1 || value === true;
    return value;
  },
});

/** How a value of a column type is bound: JSON as text, booleans as 1/0. */
function encoderFor(column: DataColumn): (value: unknown) => unknown {
  if (column.type === 'json') return (value) => (value === null ? null : JSON.stringify(value));
  if (column.type === 'boolean') return (value) => (value === null ? null : value ? 1 : 0);
  return asIs;
}

const asIs = (value: unknown) => value;
