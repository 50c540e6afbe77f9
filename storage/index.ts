import path from 'node:path';
import { openPostgresStorage } from './postgres.ts';
import { openSqliteStorage } from './sqlite.ts';
import type { Storage, StorageOptions } from './types.ts';

export type { Storage, StorageOptions, TableSnapshot, PortableColumnTypes, TrackedTable } from './types.ts';
export { containsText } from './text-search.ts';
export { POSTGRES_COLUMN_TYPES, governedRolePrefix } from './postgres-governed.ts';
export { parsePostgresSelect } from './postgres-select.ts';
export { SelectRefusedError, type GovernedSelect } from './select-statement.ts';
export { LONG_READ_DEFAULTS, type ColumnBlock, type LongReadOptions } from './long-reads.ts';
export type { ColumnStatistics } from './column-profile.ts';
export { GovernedSqlUnavailableError, QueryRejectedError, QueryTimeoutError, type GovernedDataset, type GovernedDescribe, type GovernedWrite, type ReadOnlyQuery, type ReadOnlyResult } from './read-only-query.ts';
export { DATA_COLUMN_TYPES, quoteIdentifier, ROW_ID, type DataColumn, type DataColumnType, type DataTables } from './data-tables.ts';
export { Migrator, type Migration, type MigrationContext, type MigrationSource, type MigrationStep } from './migrator.ts';

/**
 * Opens the adapter a `DATABASE_URL` names: unset or `sqlite:PATH` is SQLite (PATH relative to the
 * working directory; default `<dataDir>/platform.db`), `postgres://` or `postgresql://` is Postgres.
 */
export function openStorage(databaseUrl: string | undefined, dataDir: string, options: StorageOptions = {}): Storage {
  if (!databaseUrl) return openSqliteStorage(path.join(dataDir, 'platform.db'), options);
  if (databaseUrl.startsWith('sqlite:')) return openSqliteStorage(databaseUrl.slice('sqlite:'.length) || path.join(dataDir, 'platform.db'), options);
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) return openPostgresStorage(databaseUrl, options);
  throw new Error(`unsupported database URL scheme in "${databaseUrl.split(':')[0]}:" (use sqlite:PATH or postgres://…)`);
}

/** True when the URL names a database this platform can open; used by settings validation. */
export function isSupportedDatabaseUrl(url: string): boolean {
  return url.startsWith('sqlite:') || /^postgres(ql)?:\/\//.test(url);
}
