import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { sql, type Kysely } from 'kysely';
import { profilePostgres } from './column-profile-postgres.ts';
import { QueryTimeoutError } from './read-only-query.ts';
import type { PostgresTableClaims } from './table-claims-postgres.ts';
import { ROW_ID, batchSize, inlineParameters, insertStatement, quoteIdentifier, sqlLiteral, type DataColumn, type DataColumnType, type DataTables, type RowWriter } from './data-tables.ts';

/** Each platform column type as a Postgres column type (governed writes cast to it too). */
export const POSTGRES_TYPES: Readonly<Record<DataColumnType, string>> = {
  string: 'text',
  integer: 'bigint',
  number: 'double precision',
  boolean: 'boolean',
  date: 'date',
  timestamp: 'timestamptz',
  json: 'jsonb',
};

const schema = (orgId: number) => `org_${orgId}`;

/** The advisory lock under which an organization's schema is created (governed SQL's role setup takes it too). */
export const namespaceLockKey = (orgId: number) => `org-schema:${schema(orgId)}`;

/** SQLSTATEs: a statement stopped by statement_timeout (or a cancel), a pattern `~` cannot compile. */
const QUERY_CANCELED = '57014';
const INVALID_REGULAR_EXPRESSION = '2201B';

/** A value as a field of COPY's CSV format: NULL unquoted and empty, every text quoted, JSON as its text. */
function copyField(type: DataColumnType, value: unknown): string {
  if (value === null || value === undefined) return '';
  if (type === 'json') return `"${JSON.stringify(value).replace(/"/g, '""')}"`;
  if (typeof value === 'boolean') return value ? 't' : 'f';
  if (typeof value === 'number') return String(value);
  const text = String(value);
  // Most texts hold no quote: no replace (and no new string) for them.
  return text.includes('"') ? `"${text.replace(/"/g, '""')}"` : `"${text}"`;
}

/** Runs `work` in a transaction whose statements are stopped past `timeoutMs` (a QueryTimeoutError). */
async function withStatementTimeout<T>(db: Kysely<any>, timeoutMs: number, work: (trx: Kysely<any>) => Promise<T>): Promise<T> {
  try {
    return await db.transaction().execute(async (trx) => {
      await sql`select set_config('statement_timeout', ${String(Math.max(1, Math.floor(timeoutMs)))}, true)`.execute(trx);
      return work(trx);
    });
  } catch (err) {
    throw stoppedByTimeout(err, timeoutMs);
  }
}

/** A statement Postgres stopped (statement_timeout) as the QueryTimeoutError it is; any other error as it is. */
export function stoppedByTimeout(err: unknown, timeoutMs: number): unknown {
  return (err as { code?: string })?.code === QUERY_CANCELED ? new QueryTimeoutError(`the query ran longer than ${timeoutMs} ms and was stopped`) : err;
}

/**
 * One COPY FROM STDIN for every batch of a load, on a connection of its own: Postgres stores a
 * batch while the next is being parsed, and the socket's back-pressure paces the writer. A batch
 * goes in one write (a write per line costs a system call each).
 */
function copyWriter(client: pg.PoolClient, target: string, columns: DataColumn[]): RowWriter {
  const copy = client.query(copyFrom(`copy ${target} (${columns.map((c) => quoteIdentifier(c.name)).join(', ')}) from stdin with (format csv)`));
  const types = columns.map((c) => c.type);
  let failure: Error | undefined;
  copy.on('error', (err: Error) => (failure ??= err)); // kept for the next call; never an unhandled event
  let released = false;
  const release = (discard: boolean) => {
    if (!released) client.release(discard);
    released = true;
  };
  return {
    async write(rows) {
      if (failure) throw failure;
      // Lines built field by field: no array per row (a million rows of garbage is the load's GC time).
      let text = '';
      for (const row of rows) {
        text += copyField(types[0], row[0]);
        for (let i = 1; i < types.length; i += 1) text += `,${copyField(types[i], row[i])}`;
        text += '\n';
      }
      if (!copy.write(text)) await once(copy, 'drain');
    },
    async end() {
      try {
        copy.end();
        await finished(copy);
        release(false);
      } catch (err) {
        release(true);
        throw err;
      }
    },
    async abort() {
      // Destroying the stream sends CopyFail: Postgres drops what this COPY wrote. The connection is not reused.
      copy.destroy(new Error('load abandoned'));
      await finished(copy).catch(() => undefined);
      release(true);
    },
  };
}

/**
 * Runs a change of an organization's tables under its namespace lock, in `db`'s transaction (or one
 * of its own): governed SQL's grants on those tables (every table of the schema, when an
 * instance sets its role up) take the lock too, and a grant racing a drop or a rename fails one of
 * the two with "tuple concurrently updated" (or "deleted").
 */
async function underNamespaceLock(db: Kysely<any>, orgId: number, change: (trx: Kysely<any>) => Promise<unknown>): Promise<void> {
  if (!db.isTransaction) return db.transaction().execute((trx) => underNamespaceLock(trx, orgId, change));
  await sql`select pg_advisory_xact_lock(hashtext(${namespaceLockKey(orgId)}))`.execute(db);
  await change(db);
}

/**
 * Postgres: a schema per organization. Rows are loaded with COPY FROM STDIN on a connection of
 * their own (the fastest way into Postgres); inside a transaction, where that connection would not
 * see the transaction's tables, multi-row INSERTs are used instead.
 */
export const createPostgresDataTables = (pool: pg.Pool, claims: PostgresTableClaims): DataTables => ({
  maxParameters: 65_000,
  ref: (orgId, table) => sql.id(schema(orgId), table),
  async ensureNamespace(db, orgId) {
    if ((await sql`select 1 from pg_namespace where nspname = ${schema(orgId)}`.execute(db)).rows.length) return;
    // Two `create schema if not exists` of one name at once collide in the catalog (a unique
    // violation, which read as a dataset name conflict): one transaction creates it at a time.
    if (!db.isTransaction) return db.transaction().execute((trx) => this.ensureNamespace(trx, orgId));
    await sql`select pg_advisory_xact_lock(hashtext(${namespaceLockKey(orgId)}))`.execute(db);
    await sql`create schema if not exists ${sql.id(schema(orgId))}`.execute(db);
  },
  async create(db, orgId, table, columns) {
    await this.ensureNamespace(db, orgId);
    const definitions = [sql`${sql.id(ROW_ID)} bigint generated by default as identity primary key`, ...columns.map((c) => sql`${sql.id(c.name)} ${sql.raw(POSTGRES_TYPES[c.type])}`)];
    await underNamespaceLock(db, orgId, (trx) => sql`create table ${sql.id(schema(orgId), table)} (${sql.join(definitions)})`.execute(trx));
  },
  async drop(db, orgId, table) {
    await underNamespaceLock(db, orgId, (trx) => sql`drop table if exists ${sql.id(schema(orgId), table)}`.execute(trx));
  },
  // A catalog change on Postgres (the files go at commit): cheap wherever it runs.
  async discard(db, orgId, table) {
    await this.drop(db, orgId, table);
  },
  async analyze(db, orgId, table) {
    await sql`analyze ${sql.id(schema(orgId), table)}`.execute(db);
  },
  async rename(db, orgId, from, to) {
    await underNamespaceLock(db, orgId, (trx) => sql`alter table ${sql.id(schema(orgId), from)} rename to ${sql.id(to)}`.execute(trx));
  },
  async index(db, orgId, table, name, columns) {
    if (db.isTransaction) throw new Error('an index is built concurrently, which cannot happen inside a transaction');
    // One connection for the session lock: only its holder drops or builds the index, so an
    // invalid one found there is a failed build, never one in progress.
    await db.connection().execute(async (connection) => {
      const lock = sql`hashtext(${`org-index:${schema(orgId)}.${name}`})`;
      const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${lock}) as locked`.execute(connection);
      if (!rows[0].locked) return; // another connection is building it
      try {
        const found = await sql<{ table: string; valid: boolean }>`
          select t.relname as table, x.indisvalid as valid from pg_index x
          join pg_class i on i.oid = x.indexrelid join pg_class t on t.oid = x.indrelid join pg_namespace n on n.oid = i.relnamespace
          where n.nspname = ${schema(orgId)} and i.relname = ${name}`.execute(connection);
        const index = found.rows[0];
        if (index?.table === table && index.valid) return;
        // The name is taken by the index of a replaced table not dropped yet, or by a failed build.
        if (index) await sql`drop index concurrently if exists ${sql.id(schema(orgId), name)}`.execute(connection);
        await sql`create index concurrently if not exists ${sql.id(name)} on ${sql.id(schema(orgId), table)} (${sql.join(columns.map((column) => sql.id(column)))})`.execute(connection);
      } finally {
        await sql`select pg_advisory_unlock(${lock})`.execute(connection);
      }
    });
  },
  claim: (orgId, table) => claims.claim(`${schema(orgId)}.${table}`),
  async dropUnclaimed(db, isCandidate) {
    const { rows } = await sql<{ namespace: string; name: string }>`
      select table_schema as namespace, table_name as name from information_schema.tables
      where table_schema ~ '^org_[0-9]+$' and table_type = 'BASE TABLE' order by 1, 2`.execute(db);
    const dropped: string[] = [];
    for (const { namespace, name } of rows.filter((r) => isCandidate(r.name))) {
      const release = await claims.tryClaim(`${namespace}.${name}`);
      if (!release) continue; // a load of a live instance holds it
      try {
        await sql`drop table if exists ${sql.id(namespace, name)}`.execute(db);
        dropped.push(`${namespace}.${name}`);
      } finally {
        await release();
      }
    }
    return dropped;
  },
  async openWriter(db, orgId, table, columns) {
    if (!db.isTransaction) return copyWriter(await pool.connect(), `${quoteIdentifier(schema(orgId))}.${quoteIdentifier(table)}`, columns);
    const size = batchSize(columns.length, this.maxParameters);
    // Parameters arrive as text; the casts let Postgres parse them into the column's type.
    const cast = (type: DataColumnType, value: unknown) =>
      value === null ? null : type === 'json' ? sql`${JSON.stringify(value)}::jsonb` : value;
    return {
      async write(rows) {
        for (let i = 0; i < rows.length; i += size) {
          await insertStatement(sql.id(schema(orgId), table), columns, rows.slice(i, i + size), cast).execute(db);
        }
      },
      end: async () => undefined,
      abort: async () => undefined,
    };
  },
  inline: (fragment, db) => {
    const compiled = fragment.compile(db);
    return inlineParameters(compiled.sql, compiled.parameters, /^\$(\d+)/, (value) => sqlLiteral(value, ['true', 'false']));
  },
  // POSIX regular expressions, Postgres' own.
  cast: (expression, type) => sql`cast(${expression} as ${sql.raw(POSTGRES_TYPES[type])})`,
  textBytes: (expression) => sql<number>`coalesce(octet_length(cast(${expression} as text)), 0)`,
  matches: (expression, pattern) => sql<boolean>`(${expression} ~ ${pattern})`,
  async patternError(db, pattern, timeoutMs) {
    try {
      await withStatementTimeout(db, timeoutMs, (trx) => sql`select '' ~ ${pattern}`.execute(trx));
      return null;
    } catch (err) {
      if ((err as { code?: string }).code === INVALID_REGULAR_EXPRESSION) return (err as Error).message;
      if (err instanceof QueryTimeoutError) return `Postgres took longer than ${timeoutMs} ms to compile it`;
      throw err;
    }
  },
  decode(_type, value) {
    return value === undefined ? null : value;
  },
  profile: profilePostgres,
});
