import type pg from 'pg';
import type { DataColumnType } from './data-tables.ts';
import { QueryRejectedError, QueryTimeoutError, type ReadOnlyQuery, type ReadOnlyResult } from './read-only-query.ts';

/** Postgres type ids → the platform's column types; any other type reads as text (`string`). */
export const POSTGRES_COLUMN_TYPES: Readonly<Record<number, DataColumnType>> = {
  16: 'boolean',
  20: 'integer',
  21: 'integer',
  23: 'integer',
  700: 'number',
  701: 'number',
  1700: 'number',
  1082: 'date',
  1114: 'timestamp',
  1184: 'timestamp',
  114: 'json',
  3802: 'json',
};

/**
 * Governed SQL on Postgres: a READ ONLY transaction with a statement timeout and an empty search
 * path, on its own pooled connection; Postgres stops a runaway statement itself.
 */
export async function runPostgresReadOnly(pool: pg.Pool, query: ReadOnlyQuery): Promise<ReadOnlyResult> {
  const client = await pool.connect();
  try {
    await client.query('begin transaction read only');
    await client.query(`set local statement_timeout = ${Math.max(1, Math.floor(query.timeoutMs))}`);
    // Nothing unqualified resolves to the platform's own tables: datasets are read by qualified
    // names, so a name the guard let through by mistake finds nothing (pg_catalog stays searched).
    await client.query(`set local search_path = ''`);
    const result = await client.query({ text: `select * from (${query.sql}) as governed_query limit ${query.limit + 1}`, values: query.params, rowMode: 'array' });
    const truncated = result.rows.length > query.limit;
    return {
      columns: result.fields.map((f) => ({ name: f.name, type: POSTGRES_COLUMN_TYPES[f.dataTypeID] ?? 'string' })),
      rows: truncated ? result.rows.slice(0, query.limit) : result.rows,
      truncated,
    };
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === '57014') throw new QueryTimeoutError(`the query ran longer than ${query.timeoutMs} ms and was stopped`);
    // Class 42 (syntax or access rule), 22 (data exception), 25 (read-only transaction): the query's fault.
    if (code && /^(42|22|25|2B|0A)/.test(code)) throw new QueryRejectedError((err as Error).message);
    throw err;
  } finally {
    await client.query('rollback').catch(() => undefined);
    client.release();
  }
}
