import { postgresFullText } from './text-search.ts';
import pg from 'pg';
import { Kysely, PostgresDialect, sql, type CreateTableBuilder } from 'kysely';
import { changeEvents, checkCounterName, CREATE_COUNTERS_TABLE, isLastCounterGone } from './change-counters.ts';
import { quoteIdentifier } from './data-tables.ts';
import { createPostgresDataTables } from './data-tables-postgres.ts';
import { kyselyOver, LONG_READ_DEFAULTS, withTurns } from './long-reads.ts';
import { isPostgresConnectionLost, superviseConnections } from './postgres-connections.ts';
import { postgresColumnReads, postgresLongReads } from './postgres-long-reads.ts';
import { ReadTurns } from './read-turns.ts';
import { PostgresListener } from './postgres-listener.ts';
import { CHANGE_COUNTERS_CHANNEL, PostgresCounters, tickAfterWrites } from './postgres-counters.ts';
import { WriteClock } from './write-clock.ts';
import { PostgresTableClaims } from './table-claims-postgres.ts';
import { PostgresGovernedRunner } from './postgres-governed.ts';
import { parsePostgresGovernedSelect } from './postgres-select.ts';
import type { Storage, StorageOptions, TableSnapshot } from './types.ts';

const OID = { int8: 20, date: 1082, timestamp: 1114, timestamptz: 1184 } as const;
// An arbitrary constant: every instance sharing the database contends for the same advisory lock.
const MIGRATION_LOCK_KEY = 4_207_310_001;

/**
 * Type parsers local to this pool (not pg's process-wide registry): timestamps come back as the
 * same ISO-8601 UTC strings SQLite returns, and 64-bit counts as numbers.
 */
const poolTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === OID.timestamptz) return (value: string) => new Date(value).toISOString();
    if (oid === OID.timestamp) return (value: string) => new Date(`${value}Z`).toISOString();
    if (oid === OID.int8) return (value: string) => Number(value);
    if (oid === OID.date) return (value: string) => value; // a calendar date, not an instant: keep YYYY-MM-DD
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://(unparseable url)';
  }
}

/**
 * The trigger function of every tracked table: counts the change, and notifies the instances
 * listening (PostgresCounters) as it commits. The change counters' triggers are deferred to the
 * commit, and a notification is sent when its transaction commits, once per counter however many
 * rows changed.
 */
const BUMP_CHANGE_COUNTER = `create or replace function bump_change_counter() returns trigger language plpgsql as $$ begin update change_counters set value = value + 1 where name = tg_argv[0]; perform pg_notify('${CHANGE_COUNTERS_CHANNEL}', tg_argv[0]); return null; end $$`;

/** Postgres adapter over a pg pool. Platform tables live in the connection's default schema. */
export function openPostgresStorage(connectionString: string, options: StorageOptions = {}, poolSize = 10): Storage {
  const pool = new pg.Pool({ connectionString, max: poolSize, types: poolTypes });
  // A connection the server ends (restart, failover, pg_terminate_backend), idle or busy, must not
  // end the process: the statement fails, pg drops the client and the next query opens a new one.
  const connections = superviseConnections(pool);
  const claims = new PostgresTableClaims(pool.options);
  const listener = new PostgresListener({ connectionString });
  const dialect = new PostgresDialect({ pool });
  const db = new Kysely<any>({ dialect });
  /** Set once shutdown stops the running statements. */
  let stopping = false;
  const longReadDriver = postgresLongReads(pool, () => stopping);
  const columnReads = postgresColumnReads(pool, () => stopping);
  const readers = options.readWorkers ?? LONG_READ_DEFAULTS.workers;
  // Long reads take at most this many of the pool's connections: the others stay for short requests.
  const turns = new ReadTurns(readers, Math.min(readers, options.readWorkersPerOrganization ?? LONG_READ_DEFAULTS.perOrganization));
  const governed = new PostgresGovernedRunner(pool, connectionString, options.secretKey, poolTypes);
  // Every platform write goes through this pool (the others read, or fill data tables, which no counter tracks).
  const writes = WriteClock.of(`postgres:${connectionString}`);
  pool.on('connect', (client) => tickAfterWrites(client, writes));
  const counters = new PostgresCounters(pool, writes, listener);

  return {
    db,
    description: redactUrl(connectionString),
    dataTables: createPostgresDataTables(pool, claims),
    longReads: (orgId, readOptions) => kyselyOver(dialect, withTurns(longReadDriver(readOptions?.timeoutMs), turns, orgId)),
    longReadColumns: (orgId, query, readOptions) => turns.during(orgId, () => columnReads(query, readOptions?.timeoutMs)),
    types: { json: 'jsonb', timestamp: 'timestamptz', text: 'text', integer: 'integer', bigint: 'bigint', boolean: 'boolean', double: 'double precision' },
    addIdColumn<TB extends string, C extends string>(table: CreateTableBuilder<TB, C>, name = 'id') {
      return table.addColumn(name, 'integer', (col) => col.primaryKey().generatedByDefaultAsIdentity()) as CreateTableBuilder<TB, C>;
    },
    async guardAppendOnly(db, table) {
      await sql
        .raw(`create function ${table}_refuse_change() returns trigger language plpgsql as $$ begin raise exception '${table} is append-only'; end $$`)
        .execute(db);
      await sql.raw(`create trigger ${table}_append_only before update or delete on ${table} for each statement execute function ${table}_refuse_change()`).execute(db);
    },
    async unguardAppendOnly(db, table) {
      await sql.raw(`drop trigger if exists ${table}_append_only on ${table}`).execute(db);
      await sql.raw(`drop function if exists ${table}_refuse_change()`).execute(db);
    },
    async trackChanges(db, counter, tables) {
      checkCounterName(counter);
      await sql.raw(CREATE_COUNTERS_TABLE).execute(db);
      await sql`insert into change_counters (name, value) values (${counter}, 0) on conflict (name) do nothing`.execute(db);
      await sql.raw(BUMP_CHANGE_COUNTER).execute(db);
      for (const tracked of tables) {
        const events = changeEvents(tracked, quoteIdentifier).map((e) => e.clause).join(' or ');
        // Deferred to commit: the counter row's lock is taken last and held only while committing,
        // so writers of different identity rows never wait on each other in the middle of their work.
        await sql
          .raw(
            `create constraint trigger ${quoteIdentifier(`${counter}__${tracked.table}`)} after ${events} on ${quoteIdentifier(tracked.table)} deferrable initially deferred for each row execute function bump_change_counter('${counter}')`,
          )
          .execute(db);
      }
    },
    async untrackChanges(db, counter, tables) {
      checkCounterName(counter);
      for (const tracked of tables) await sql.raw(`drop trigger if exists ${quoteIdentifier(`${counter}__${tracked.table}`)} on ${quoteIdentifier(tracked.table)}`).execute(db);
      await sql`delete from change_counters where name = ${counter}`.execute(db);
      if (await isLastCounterGone(db)) {
        await sql.raw('drop table change_counters').execute(db);
        await sql.raw('drop function if exists bump_change_counter()').execute(db);
      }
    },
    changeCounter: (counter) => counters.get(counter),
    // pg serialises objects itself, but arrays would be sent as Postgres arrays: always send text.
    encodeJson: (value) => (value === undefined ? null : JSON.stringify(value)),
    decodeJson: <T>(stored: unknown) => stored as T,
    now: () => new Date().toISOString(),
    transaction: (work) => db.transaction().execute(work),
    async lockForTransaction(trx, key) {
      await sql`select pg_advisory_xact_lock(hashtext(${key}))`.execute(trx);
    },
    skipLocked: (query) => query.forUpdate().skipLocked() as typeof query,
    async commitLazily(trx) {
      await sql`set local synchronous_commit = off`.execute(trx);
    },
    async notify(db, channel) {
      await sql`select pg_notify(${channel}, '')`.execute(db);
    },
    listen: (channel, wake) => listener.listen(channel, wake),
    async withMigrationLock(work) {
      const client = await pool.connect();
      try {
        await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
        return await work();
      } finally {
        await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => undefined);
        client.release();
      }
    },
    async snapshotSchema(executor = db) {
      const columns = await sql<{ table_name: string; column_name: string; data_type: string; is_nullable: string; has_default: boolean }>`
        select table_name, column_name, data_type, is_nullable, (column_default is not null or is_identity = 'YES' or is_generated = 'ALWAYS') as has_default
        from information_schema.columns
        where table_schema = current_schema() order by table_name, ordinal_position`.execute(executor);
      const indexes = await sql<{ tablename: string; indexname: string }>`
        select tablename, indexname from pg_indexes where schemaname = current_schema() order by indexname`.execute(executor);
      const byTable = new Map<string, TableSnapshot>();
      for (const c of columns.rows) {
        const table = byTable.get(c.table_name) ?? { name: c.table_name, columns: [], indexes: [] };
        table.columns.push({ name: c.column_name, type: c.data_type, nullable: c.is_nullable === 'YES', hasDefault: c.has_default });
        byTable.set(c.table_name, table);
      }
      for (const i of indexes.rows) byTable.get(i.tablename)?.indexes.push(i.indexname);
      return [...byTable.values()].sort((a, b) => a.name.localeCompare(b.name));
    },
    parseGovernedSelect: parsePostgresGovernedSelect,
    runReadOnly: (query) => governed.run(query),
    writeGoverned: (write) => governed.write(write),
    describeGoverned: (query) => governed.describe(query),
    fullText: postgresFullText(),
    // A date minus a date is a number of days, not an interval: both are read as timestamptz first.
    secondsBetweenSql: (earlier, later) => `cast(extract(epoch from (cast(${later} as timestamptz) - cast(${earlier} as timestamptz))) as double precision)`,
    governedSqlRoleStatements: (orgIds) => governed.roleStatements(orgIds),
    isUniqueViolation: (err) => (err as { code?: unknown })?.code === '23505',
    // A statement shutdown cancelled (57014) did not fail on its own account either: a 503, not a 500.
    isConnectionLost: (err) => isPostgresConnectionLost(err) || (stopping && (err as { code?: unknown })?.code === '57014'),
    async ping() {
      await sql`select 1`.execute(db);
    },
    cancelRunning: async () => {
      stopping = true;
      await Promise.all([connections.cancelRunning(), governed.cancelRunning()]);
    },
    async close() {
      // pg's pool ends once every client is back: stop the statements that would keep one out.
      await Promise.all([governed.close(), connections.cancelRunning()]);
      await listener.close();
      await db.destroy();
      await claims.close();
    },
  };
}
