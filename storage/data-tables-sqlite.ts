import path from 'node:path';
import type Database from 'better-sqlite3';
import { sql } from 'kysely';
import { profileSqlite } from './column-profile-sqlite.ts';
import { compileRegexp } from './sqlite-regexp.mjs';
import { ROW_ID, inlineParameters, quoteIdentifier as quote, sqlLiteral, type DataColumn, type DataColumnType, type DataTables } from './data-tables.ts';

/** Each platform column type as a SQLite column type (its affinity). */
export const SQLITE_TYPES: Record<DataColumnType, string> = {
  string: 'text',
  integer: 'integer',
  number: 'real',
  boolean: 'boolean',
  date: 'text',
  timestamp: 'text',
  json: 'text',
};

export const physical = (orgId: number, table: string) => `org_${orgId}__${table}`;

/**
 * Tables claimed by loads, per database file, for every connection of this process (kernels
 * sharing a file in one process see each other's claims).
 */
const claimsByFile = new Map<string, Set<string>>();
const claimsOf = (database: Database.Database) => {
  const file = database.memory ? database.name : path.resolve(database.name);
  let claims = claimsByFile.get(file);
  if (!claims) claimsByFile.set(file, (claims = new Set()));
  return claims;
};

/** Parameters one statement may bind (SQLite's own limit is 32766). */
const MAX_PARAMETERS = 30_000;
/** Rows bound by one INSERT of a load: past a few, more rows per statement gain nothing. */
const ROWS_PER_STATEMENT = 20;

/**
 * SQLite: one file, so an organization's tables share a name prefix instead of a schema. Rows are
 * inserted through the driver directly: a prepared INSERT of several rows, re-run with one reused
 * array, inside a transaction per batch, is far cheaper than building INSERT texts or running a
 * statement per row (the connection is the one the query builder uses, so this joins any
 * transaction in progress).
 */
export const createSqliteDataTables = (database: Database.Database, dropElsewhere: (orgId: number, physicalName: string) => Promise<void>): DataTables => ({
  maxParameters: MAX_PARAMETERS,
  ref: (orgId, table) => sql.id(physical(orgId, table)),
  async ensureNamespace() {},
  async create(db, orgId, table, columns) {
    const definitions = [sql`${sql.id(ROW_ID)} integer primary key autoincrement`, ...columns.map((c) => sql`${sql.id(c.name)} ${sql.raw(SQLITE_TYPES[c.type])}`)];
    await sql`create table ${sql.id(physical(orgId, table))} (${sql.join(definitions)})`.execute(db);
  },
  async drop(db, orgId, table) {
    await sql`drop table if exists ${sql.id(physical(orgId, table))}`.execute(db);
  },
  discard: (_db, orgId, table) => dropElsewhere(orgId, physical(orgId, table)),
  analyze: async () => undefined,
  async rename(db, orgId, from, to) {
    // Legacy renaming: no trigger or view refers to a dataset table, and the modern one re-reads
    // and checks the whole schema, whose size follows the number of datasets (2 ms instead of
    // 10 to 20 with 200 tables, on the event loop).
    await sql`pragma legacy_alter_table = on`.execute(db);
    try {
      await sql`alter table ${sql.id(physical(orgId, from))} rename to ${sql.id(physical(orgId, to))}`.execute(db);
    } finally {
      await sql`pragma legacy_alter_table = off`.execute(db);
    }
  },
  async index(db, orgId, table, name, columns) {
    const target = physical(orgId, table);
    const { rows } = await sql<{ tbl_name: string }>`select tbl_name from sqlite_master where type = 'index' and name = ${name}`.execute(db);
    if (rows[0]?.tbl_name === target) return;
    // The name is taken by the index of a replaced table that is not dropped yet.
    if (rows.length) await sql`drop index if exists ${sql.id(name)}`.execute(db);
    await sql`create index if not exists ${sql.id(name)} on ${sql.id(target)} (${sql.join(columns.map((column) => sql.id(column)))})`.execute(db);
  },
  async claim(orgId, table) {
    const claims = claimsOf(database);
    const name = physical(orgId, table);
    claims.add(name);
    return async () => void claims.delete(name);
  },
  async dropUnclaimed(db, isCandidate) {
    const claims = claimsOf(database);
    const { rows } = await sql<{ name: string }>`select name from sqlite_master where type = 'table' order by name`.execute(db);
    const dropped: string[] = [];
    for (const { name } of rows) {
      const match = /^org_(\d+)__(.+)$/.exec(name);
      if (!match || !isCandidate(match[2]) || claims.has(name)) continue;
      await sql`drop table if exists ${sql.id(name)}`.execute(db);
      dropped.push(`org_${match[1]}.${match[2]}`);
    }
    return dropped;
  },
  async openWriter(_db, orgId, table, columns) {
    const encoders = columns.map(encoderFor);
    const width = columns.length;
    const statement = (rows: number) => {
      const tuple = `(${columns.map(() => '?').join(', ')})`;
      return database.prepare(`insert into ${quote(physical(orgId, table))} (${columns.map((c) => quote(c.name)).join(', ')}) values ${Array(rows).fill(tuple).join(', ')}`);
    };
    // Several rows per statement: each run() crosses into the driver once, whatever it binds.
    const perStatement = Math.max(1, Math.min(ROWS_PER_STATEMENT, Math.floor(MAX_PARAMETERS / width)));
    const insertMany = statement(perStatement);
    const insertOne = statement(1);
    const many: unknown[] = new Array(perStatement * width); // bound again and again
    const one: unknown[] = new Array(width);
    const bind = (target: unknown[], at: number, row: unknown[]) => {
      for (let i = 0; i < width; i += 1) target[at + i] = encoders[i](row[i]);
    };
    const insertAll = (rows: unknown[][]) => {
      let next = 0;
      for (; next + perStatement <= rows.length; next += perStatement) {
        for (let k = 0; k < perStatement; k += 1) bind(many, k * width, rows[next + k]);
        insertMany.run(many);
      }
      for (; next < rows.length; next += 1) {
        bind(one, 0, rows[next]);
        insertOne.run(one);
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
  // `regexp` is registered on the connection by the SQLite adapter: RE2, compiled by `compileRegexp`.
  // Booleans are stored as 0 and 1: a cast to integer writes them so.
  cast: (expression, type) => sql`cast(${expression} as ${sql.raw(type === 'boolean' ? 'integer' : SQLITE_TYPES[type])})`,
  textBytes: (expression) => sql<number>`coalesce(length(cast(${expression} as blob)), 0)`,
  matches: (expression, pattern) => sql<boolean>`regexp(${pattern}, ${expression})`,
  async patternError(_db, pattern) {
    try {
      compileRegexp(pattern);
      return null;
    } catch (err) {
      return (err as Error).message;
    }
  },
  profile: profileSqlite,
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
