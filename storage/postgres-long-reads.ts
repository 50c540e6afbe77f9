import type pg from 'pg';
import { CompiledQuery, PostgresDialect, type DatabaseConnection, type Driver } from 'kysely';
import { stoppedByTimeout } from './data-tables-postgres.ts';

/**
 * Long reads on Postgres: connections of the platform's pool. Answers the driver for a statement
 * timeout: with `timeoutMs`, the session's statement_timeout is set while a connection is out and
 * reset before it goes back, and a statement it stops fails with a QueryTimeoutError (unless
 * `stopping` says the platform's shutdown cancelled it).
 */
export function postgresLongReads(pool: pg.Pool, stopping: () => boolean): (timeoutMs: number | undefined) => Driver {
  const inner = new PostgresDialect({ pool }).createDriver();
  const ready = inner.init();
  const acquire = async () => {
    await ready;
    return inner.acquireConnection();
  };
  return (timeoutMs) => {
    const innerOf = new WeakMap<DatabaseConnection, DatabaseConnection>();
    const own = (connection: DatabaseConnection) => innerOf.get(connection) ?? connection;
    // A statement the platform's shutdown cancelled did not run too long.
    const timedOut = (err: unknown) => (stopping() ? err : stoppedByTimeout(err, timeoutMs!));
    return {
      init: async () => undefined,
      async acquireConnection() {
        const connection = await acquire();
        if (timeoutMs === undefined) return connection;
        try {
          await connection.executeQuery(CompiledQuery.raw(`set statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`));
        } catch (err) {
          await inner.releaseConnection(connection);
          throw err;
        }
        const bounded: DatabaseConnection = {
          executeQuery: <R>(query: CompiledQuery) =>
            connection.executeQuery<R>(query).catch((err): never => {
              throw timedOut(err);
            }),
          streamQuery: (query, chunkSize) => connection.streamQuery(query, chunkSize),
        };
        innerOf.set(bounded, connection);
        return bounded;
      },
      beginTransaction: (connection, settings) => inner.beginTransaction(own(connection), settings),
      commitTransaction: (connection) => inner.commitTransaction(own(connection)),
      rollbackTransaction: (connection) => inner.rollbackTransaction(own(connection)),
      async releaseConnection(connection) {
        try {
          if (innerOf.has(connection)) await own(connection).executeQuery(CompiledQuery.raw('reset statement_timeout'));
        } finally {
          await inner.releaseConnection(own(connection));
        }
      },
      // The pool is the storage's: it ends with it.
      destroy: async () => undefined,
    };
  };
}
