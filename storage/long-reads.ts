import { Kysely, type DatabaseConnection, type Dialect, type Driver } from 'kysely';
import type { ReadTurns } from './read-turns.ts';

/** How many long reads run at once, in all and per organization, unless the settings say otherwise. */
export const LONG_READ_DEFAULTS = { workers: 4, perOrganization: 2 } as const;

/** What `Storage.longReads` takes besides the organization. */
export interface LongReadOptions {
  /** A statement running longer fails with a QueryTimeoutError, and the database stops it. */
  timeoutMs?: number;
}

/** A long read's answer by column (`Storage.longReadColumns`): `values[i][r]` is the value of `columns[i]` in row `r`. */
export interface ColumnBlock {
  columns: string[];
  values: unknown[][];
  rows: number;
}

/** A long read stopped because the platform is shutting down: no fault of the statement (a 503). */
export class LongReadStoppedError extends Error {}

/**
 * `inner`, with a turn of organization `orgId` taken before each connection is handed out and given
 * back once it is released: Kysely takes a connection per statement (or per transaction), so a
 * turn is held only while the database works for this organization, never between the pages of an
 * export. The connections and their pool belong to the storage: destroying this driver keeps them.
 */
export function withTurns(inner: Driver, turns: ReadTurns, orgId: number): Driver {
  const turnsOf = new WeakMap<DatabaseConnection, () => void>();
  return {
    init: async () => undefined,
    async acquireConnection() {
      const giveBack = await turns.take(orgId);
      try {
        const connection = await inner.acquireConnection();
        turnsOf.set(connection, giveBack);
        return connection;
      } catch (err) {
        giveBack();
        throw err;
      }
    },
    beginTransaction: (connection, settings) => inner.beginTransaction(connection, settings),
    commitTransaction: (connection) => inner.commitTransaction(connection),
    rollbackTransaction: (connection) => inner.rollbackTransaction(connection),
    async releaseConnection(connection) {
      try {
        await inner.releaseConnection(connection);
      } finally {
        turnsOf.get(connection)?.();
      }
    },
    destroy: async () => undefined,
  };
}

/** A query builder speaking `base`'s dialect whose statements go through `driver`. */
export function kyselyOver(base: Dialect, driver: Driver): Kysely<any> {
  return new Kysely<any>({
    dialect: {
      createDriver: () => driver,
      createAdapter: () => base.createAdapter(),
      createQueryCompiler: () => base.createQueryCompiler(),
      createIntrospector: (db) => base.createIntrospector(db),
    },
  });
}
