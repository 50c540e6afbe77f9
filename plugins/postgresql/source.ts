import pg from 'pg';
import { OutboundFailedError } from '../../kernel/plugin-api.ts';
import { POSTGRES_COLUMN_TYPES, type DataColumnType } from '../../storage/index.ts';

const BATCH_ROWS = 1000;

declare module 'pg' {
  // pg takes it (lib/query.js, requiresPreparation); @types/pg does not list it yet.
  interface QueryConfig<I> {
    /** `extended` sends the query with the extended protocol even without parameters. */
    queryMode?: 'extended';
  }
}

export interface SourceConfig {
  host: string;
  port: number;
  database: string;
  user: string;
  password?: string;
  ssl: boolean;
}

/** Values as the dataset stores them: 64-bit integers and numerics as numbers, instants as ISO strings. */
function convert(type: DataColumnType, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (type === 'integer' || type === 'number') return Number(value);
  if (type === 'timestamp') return new Date(value as string | Date).toISOString();
  if (type === 'date') return value instanceof Date ? value.toISOString().slice(0, 10) : String(value);
  if (type === 'json' || type === 'boolean') return value;
  return typeof value === 'string' ? value : String(value);
}

/**
 * A read-only session on an external Postgres, reached at an address the outbound guard checked.
 * Dates come back as text so no time zone shifts a calendar date.
 */
export async function withSource<T>(config: SourceConfig, address: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({
    host: address,
    port: config.port,
    database: config.database,
    user: config.user,
    password: config.password,
    ssl: config.ssl ? { servername: config.host } : false,
    connectionTimeoutMillis: 10_000,
    statement_timeout: 300_000,
    types: { getTypeParser: (oid: number, format?: 'text' | 'binary') => (oid === 1082 ? (v: string) => v : pg.types.getTypeParser(oid, format as 'text')) },
  });
  // The source may end the session at any time (its administrator, a failover): the query in
  // progress fails, and pg's 'error' event, unhandled, would end the whole process.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    throw new OutboundFailedError(`could not connect to ${config.host}:${config.port}/${config.database}: ${(err as Error).message}`);
  }
  try {
    await client.query('begin transaction read only');
    return await work(client);
  } catch (err) {
    // A source that no longer answers failed the import: the peer's failure (502), not the request's.
    const answers = await client.query('rollback').then(() => true, () => false);
    if (!answers) throw new OutboundFailedError(`the connection to ${config.host}:${config.port}/${config.database} was lost: ${(err as Error).message}`);
    throw err;
  } finally {
    await client.query('rollback').catch(() => undefined);
    await client.end().catch(() => undefined);
  }
}

/** The columns of a query's result and its rows in batches, through a server-side cursor (flat memory). */
export async function readQuery(client: pg.Client, text: string): Promise<{ columns: { name: string; type: DataColumnType }[]; batches: AsyncIterable<unknown[][]> }> {
  // The extended protocol takes exactly one statement: text that smuggles in `; commit; delete …`
  // is refused by the server instead of ending the read-only transaction (pg sends a query without
  // parameters with the simple protocol, which runs every statement, unless told otherwise).
  await client.query({ text: `declare import_cursor no scroll cursor for ${text}`, queryMode: 'extended' });
  const first = await client.query({ text: `fetch ${BATCH_ROWS} from import_cursor`, rowMode: 'array' });
  const columns = first.fields.map((f) => ({ name: f.name, type: POSTGRES_COLUMN_TYPES[f.dataTypeID] ?? ('string' as const) }));
  const toRows = (rows: unknown[][]) => rows.map((row) => row.map((value, i) => convert(columns[i].type, value)));
  async function* batches() {
    let page = first;
    while (page.rows.length) {
      yield toRows(page.rows as unknown[][]);
      if (page.rows.length < BATCH_ROWS) break;
      page = await client.query({ text: `fetch ${BATCH_ROWS} from import_cursor`, rowMode: 'array' });
    }
  }
  return { columns, batches: batches() };
}
