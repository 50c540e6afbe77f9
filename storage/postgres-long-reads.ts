import type pg from 'pg';
import { CompiledQuery, PostgresDialect, type DatabaseConnection, type Driver } from 'kysely';
import { stoppedByTimeout } from './data-tables-postgres.ts';

/**
 * Long reads on Postgres: connections of the platform's pool. While a connection is out its session
 * runs without parallel workers, so one long read takes one core of the database's machine at most
 * and short requests keep the others (measured on 2 cores: light requests' p99 under a profile and
 * an export went from ×4–6 of idle to ×1.4–1.6, and the profile itself got faster, its per-column
 * statements no longer fighting their own workers). With `timeoutMs`, statement_timeout is set too,
 * and a statement it stops fails with a QueryTimeoutError (unless `stopping` says the platform's
 * shutdown cancelled it). Both are reset before the connection goes back.
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
        const session = ['set max_parallel_workers_per_gather = 0'];
        if (timeoutMs !== undefined) session.push(`set statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`);
        try {
          await connection.executeQuery(CompiledQuery.raw(session.join('; ')));
        } catch (err) {
          await inner.releaseConnection(connection);
          throw err;
        }
        if (timeoutMs === undefined) return connection;
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
          await own(connection).executeQuery(CompiledQuery.raw('reset max_parallel_workers_per_gather; reset statement_timeout'));
        } finally {
          await inner.releaseConnection(own(connection));
        }
      },
      // The pool is the storage's: it ends with it.
      destroy: async () => undefined,
    };
  };
}
