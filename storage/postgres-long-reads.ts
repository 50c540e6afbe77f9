import type pg from 'pg';
import { CompiledQuery, PostgresDialect, type DatabaseConnection, type Driver } from 'kysely';
import { byColumn } from './by-column.mjs';
import { stoppedByTimeout } from './data-tables-postgres.ts';
import type { ColumnBlock } from './long-reads.ts';

/** The session of a long read's connection (see below), and what puts it back. */
const sessionOf = (timeoutMs: number | undefined) =>
  ['set max_parallel_workers_per_gather = 0', ...(timeoutMs === undefined ? [] : [`set statement_timeout = ${Math.max(1, Math.floor(timeoutMs))}`])].join('; ');
const RESET_SESSION = 'reset max_parallel_workers_per_gather; reset statement_timeout';

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
        try {
          await connection.executeQuery(CompiledQuery.raw(sessionOf(timeoutMs)));
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
          await own(connection).executeQuery(CompiledQuery.raw(RESET_SESSION));
        } finally {
          await inner.releaseConnection(own(connection));
        }
      },
      // The pool is the storage's: it ends with it.
      destroy: async () => undefined,
    };
  };
}

/**
 * One long read answered by column (`Storage.longReadColumns`), on a connection of the pool in the
 * session above: its rows come as arrays (no object per row) and go back by column.
 */
export function postgresColumnReads(pool: pg.Pool, stopping: () => boolean): (query: CompiledQuery, timeoutMs: number | undefined) => Promise<ColumnBlock> {
  return async (query, timeoutMs) => {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      await client.query(sessionOf(timeoutMs));
      try {
        const result = await client.query({ text: query.sql, values: query.parameters as unknown[], rowMode: 'array' });
        const columns = result.fields.map((field) => field.name);
        return { columns, values: byColumn(columns.length, result.rows), rows: result.rows.length };
      } catch (err) {
        throw timeoutMs === undefined || stopping() ? err : stoppedByTimeout(err, timeoutMs);
      } finally {
        await client.query(RESET_SESSION).catch((err: Error) => void (broken = err));
      }
    } finally {
      // A connection whose session could not be put back leaves the pool.
      client.release(broken);
    }
  };
}
