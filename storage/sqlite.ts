import { sqliteFullText } from './text-search.ts';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { Kysely, SqliteDialect, sql, type CreateTableBuilder } from 'kysely';
import { changeEvents, checkCounterName, CREATE_COUNTERS_TABLE, isLastCounterGone } from './change-counters.ts';
import { quoteIdentifier } from './data-tables.ts';
import { createSqliteDataTables, physical } from './data-tables-sqlite.ts';
import { kyselyOver, LONG_READ_DEFAULTS, LongReadStoppedError, withTurns } from './long-reads.ts';
import { ReadTurns } from './read-turns.ts';
import { SqliteCheckpointer } from './sqlite-checkpointer.ts';
import { parseSqliteGovernedSelect } from './select-statement.ts';
import { SqliteReadPool } from './sqlite-read-pool.ts';
import { SqliteGovernedRunner } from './sqlite-governed.ts';
import { registerRegexp } from './sqlite-regexp.mjs';
import { LocalChannels } from './local-channels.ts';
import { withPortableValues } from './sqlite-values.ts';
import { CachedCounterRead, WriteClock } from './write-clock.ts';
import type { Storage, StorageOptions, TableSnapshot } from './types.ts';

const BUSY_TIMEOUT_MS = 5000;

/**
 * The database holds every tenant's data and the password hashes: only the platform's own user may
 * read it. A folder it creates is 0700 and the file 0600, both under the umask (SQLite gives the
 * -wal and -shm files the main file's mode); an existing file, -wal or -shm that group or others
 * may read is tightened to its owner's bits.
 */
function restrictDatabaseFiles(file: string) {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true, mode: 0o700 });
  fs.closeSync(fs.openSync(file, 'a', 0o600));
  for (const name of [file, `${file}-wal`, `${file}-shm`]) {
    const mode = fs.statSync(name, { throwIfNoEntry: false })?.mode;
    if (mode !== undefined && mode & 0o077) fs.chmodSync(name, mode & 0o700);
  }
}

/** SQLite adapter over better-sqlite3: WAL journal, foreign keys enforced, a busy timeout. */
export function openSqliteStorage(file: string, options: StorageOptions = {}): Storage {
  if (file !== ':memory:') restrictDatabaseFiles(file);
  const database = new Database(file);
  database.pragma('journal_mode = WAL');
  // In WAL mode NORMAL is durable across application crashes and only risks the newest
  // transactions on power loss; FULL would fsync on every commit.
  database.pragma('synchronous = NORMAL');
  database.pragma('foreign_keys = ON');
  database.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  // Checkpoints are the checkpointer thread's, never this connection's on the event loop (a file in memory has no WAL).
  const checkpointer = file === ':memory:' ? null : new SqliteCheckpointer(file);
  if (checkpointer) database.pragma('wal_autocheckpoint = 0');
  registerRegexp(database);
  const writes = WriteClock.ofFile(file);
  const dialect = new SqliteDialect({ database: withPortableValues(database, writes) });
  const db = new Kysely<any>({ dialect });
  // A database in memory has no file another connection could open: its long reads stay on `db`.
  const reads = file === ':memory:' ? null : new SqliteReadPool(file);
  const workers = options.readWorkers ?? LONG_READ_DEFAULTS.workers;
  const turns = new ReadTurns(workers, Math.min(workers, options.readWorkersPerOrganization ?? LONG_READ_DEFAULTS.perOrganization));
  const governed = new SqliteGovernedRunner(file, physical);
  // Governed SQL and reads by column run beside the main connection, opening the file: a database in memory has none.
  const withFile = <T>(work: () => Promise<T>, what = 'governed SQL') => (file === ':memory:' ? Promise.reject(new Error(`${what} needs a database file, not :memory:`)) : work());
  const counterReads = new Map<string, CachedCounterRead>();
  const channels = new LocalChannels();

  return {
    db,
    description: `sqlite:${file}`,
    // Dropped in a write process, when there is a file another connection can open.
    dataTables: createSqliteDataTables(database, (orgId, name) => (file === ':memory:' ? sql`drop table if exists ${sql.id(name)}`.execute(db).then(() => undefined) : governed.drop(orgId, name))),
    longReads: (orgId, readOptions) => (reads ? kyselyOver(dialect, withTurns(reads.driver(readOptions?.timeoutMs), turns, orgId)) : db),
    longReadColumns: (orgId, query, readOptions) =>
      withFile(() => turns.during(orgId, () => reads!.columns(query, readOptions?.timeoutMs)), 'a long read by column'),
    types: { json: 'text', timestamp: 'text', text: 'text', integer: 'integer', bigint: 'integer', boolean: 'boolean', double: 'real' },
    addIdColumn<TB extends string, C extends string>(table: CreateTableBuilder<TB, C>, name = 'id') {
      return table.addColumn(name, 'integer', (col) => col.primaryKey().autoIncrement()) as CreateTableBuilder<TB, C>;
    },
    async guardAppendOnly(db, table) {
      for (const operation of ['update', 'delete']) {
        await sql
          .raw(`create trigger ${table}_no_${operation} before ${operation} on ${table} begin select raise(abort, '${table} is append-only'); end`)
          .execute(db);
      }
    },
    async unguardAppendOnly(db, table) {
      for (const operation of ['update', 'delete']) await sql.raw(`drop trigger if exists ${table}_no_${operation}`).execute(db);
    },
    async trackChanges(db, counter, tables) {
      checkCounterName(counter);
      await sql.raw(CREATE_COUNTERS_TABLE).execute(db);
      await sql`insert into change_counters (name, value) values (${counter}, 0) on conflict (name) do nothing`.execute(db);
      for (const tracked of tables) {
        for (const event of changeEvents(tracked, quoteIdentifier)) {
          const trigger = quoteIdentifier(`${counter}__${tracked.table}_${event.name}`);
          await sql
            .raw(`create trigger ${trigger} after ${event.clause} on ${quoteIdentifier(tracked.table)} begin update change_counters set value = value + 1 where name = '${counter}'; end`)
            .execute(db);
        }
      }
    },
    async untrackChanges(db, counter, tables) {
      checkCounterName(counter);
      for (const tracked of tables) {
        for (const event of changeEvents(tracked, quoteIdentifier)) await sql.raw(`drop trigger if exists ${quoteIdentifier(`${counter}__${tracked.table}_${event.name}`)}`).execute(db);
      }
      await sql`delete from change_counters where name = ${counter}`.execute(db);
      if (await isLastCounterGone(db)) {
        await sql.raw('drop table change_counters').execute(db);
      }
    },
    changeCounter(counter) {
      let read = counterReads.get(counter);
      if (!read) {
        // Prepared on first use: the table exists only once a migration tracks something.
        const statement = database.prepare<[string], number>('select value from change_counters where name = ?').pluck();
        read = new CachedCounterRead(writes, () => {
          const value = statement.get(counter);
          if (value === undefined) throw new Error(`no change counter "${counter}" (no migration tracks it)`);
          return Number(value);
        });
        counterReads.set(checkCounterName(counter), read);
      }
      return read.get();
    },
    encodeJson: (value) => (value === undefined ? null : JSON.stringify(value)),
    decodeJson: <T>(stored: unknown) => (typeof stored === 'string' ? (JSON.parse(stored) as T) : (stored as T)),
    now: () => new Date().toISOString(),
    transaction: (work) => retryingBusy(() => db.transaction().execute(work)),
    // One process owns a SQLite file's writes at a time (the driver serialises them), so there is
    // nothing to coordinate beyond the transaction each migration already runs in.
    withMigrationLock: (work) => work(),
    // One connection runs one transaction at a time: transactions never interleave.
    lockForTransaction: async () => undefined,
    skipLocked: (query) => query,
    commitLazily: async () => undefined,
    notify: async (_db, channel) => channels.notify(channel),
    listen: async (channel, wake) => channels.listen(channel, wake),
    async snapshotSchema(executor = db) {
      const tables = await sql<{ name: string }>`
        select name from sqlite_master
        where type = 'table' and name not like 'sqlite_%' order by name`.execute(executor);
      const snapshot: TableSnapshot[] = [];
      for (const { name } of tables.rows) {
        // On the one connection, so inside a transaction `executor` holds as well.
        const columns = database.prepare(`select name, type, "notnull" as nn, dflt_value as dflt from pragma_table_info(?) order by cid`).all(name) as { name: string; type: string; nn: number; dflt: string | null }[];
        const indexes = database.prepare(`select name from pragma_index_list(?) order by name`).all(name) as { name: string }[];
        snapshot.push({
          name,
          columns: columns.map((c) => ({ name: c.name, type: c.type.toLowerCase(), nullable: c.nn === 0, hasDefault: c.dflt !== null })),
          indexes: indexes.map((i) => i.name),
        });
      }
      return snapshot;
    },
    parseGovernedSelect: parseSqliteGovernedSelect,
    runReadOnly: (query) => withFile(() => governed.run(query)),
    writeGoverned: (write) => withFile(() => governed.write(write)),
    describeGoverned: (query) => withFile(() => governed.describe(query)),
    fullText: sqliteFullText(),
    // Dates and timestamps are ISO 8601 text; julianday reads both (a trailing Z included).
    secondsBetweenSql: (earlier, later) => `((julianday(${later}) - julianday(${earlier})) * 86400.0)`,
    // Governed SQL needs no role on SQLite: its compiled statements are checked.
    governedSqlRoleStatements: async () => [],
    isUniqueViolation: (err) => /^SQLITE_CONSTRAINT_(UNIQUE|PRIMARYKEY)$/.test(String((err as { code?: unknown })?.code)),
    // An embedded file: no connection to lose; a long read stopped by shutdown did not fail on its own account.
    isConnectionLost: (err) => err instanceof LongReadStoppedError,
    async ping() {
      await sql`select 1`.execute(db);
    },
    // Statements on this connection run synchronously, to their end; governed SQL runs in processes
    // of its own, long reads in threads of their own: those are stopped.
    cancelRunning: async () => {
      governed.cancelRunning();
      reads?.cancelRunning();
    },
    async close() {
      await Promise.all([governed.close(), reads?.close()]);
      await db.destroy();
      await checkpointer?.close();
    },
  };
}

/** How long a transaction is run again while another connection holds the write lock (as BUSY_TIMEOUT_MS waits for a statement). */
const TRANSACTION_RETRY_MS = BUSY_TIMEOUT_MS;

/**
 * Runs a transaction again while it fails because another connection writes the same file (the
 * governed write processes of recipes, another instance): SQLITE_BUSY_SNAPSHOT, when one of them
 * committed after this transaction read, and SQLITE_BUSY, when this transaction, having read, wants
 * to write while one of them holds the write lock (SQLite answers that at once, without the busy
 * timeout, since waiting could deadlock). Run again, it reads afresh. The waits between attempts
 * are timers: the event loop keeps serving meanwhile, where BEGIN IMMEDIATE would have waited for
 * the lock synchronously.
 */
async function retryingBusy<T>(transaction: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + TRANSACTION_RETRY_MS;
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await transaction();
    } catch (err) {
      const code = (err as { code?: string }).code;
      if ((code !== 'SQLITE_BUSY' && code !== 'SQLITE_BUSY_SNAPSHOT') || Date.now() >= deadline) throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(2 * attempt, 25)));
  }
}
