import { sql } from 'kysely';
import { ROW_ID, insertStatement, batchSize, type DataColumnType, type DataTables } from './data-tables.ts';

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

/** SQLite: one file, so an organization's tables share a name prefix instead of a schema. */
export const sqliteDataTables: DataTables = {
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
  async insert(db, orgId, table, columns, rows) {
    const size = batchSize(columns.length, this.maxParameters);
    const encode = (type: DataColumnType, value: unknown) => (value === null ? null : type === 'json' ? JSON.stringify(value) : value);
    for (let i = 0; i < rows.length; i += size) {
      await insertStatement(sql.id(physical(orgId, table)), columns, rows.slice(i, i + size), encode).execute(db);
    }
  },
  // `regexp` is registered on the connection by the SQLite adapter (JavaScript regular expressions).
  matches: (expression, pattern) => sql<boolean>`regexp(${pattern}, ${expression})`,
  decode(type, value) {
    if (value === null || value === undefined) return null;
    if (type === 'json') return JSON.parse(value as string);
    if (type === 'boolean') return value === 1 || value === true;
    return value;
  },
};
