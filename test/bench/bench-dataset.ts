/**
 * The large dataset the long-read and pipeline benches read (LONG_READ_ROWS rows × 4 columns),
 * created through the API and filled by one statement straight into its table (the API would
 * take minutes), and the small helpers those benches share.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import type { DialectName } from '../harness/dialects.ts';

export const LONG_READ_ROWS = Number(process.env.BENCH_LONG_READ_ROWS ?? 1_000_000);
export const BENCH_COLUMNS = [
  { name: 'id', type: 'integer' },
  { name: 'amount', type: 'number' },
  { name: 'country', type: 'string' },
  { name: 'day', type: 'date' },
];

/** A kernel process started by the caller, reachable at `base`, over `databaseUrl`. */
export interface BenchKernel {
  base: string;
  databaseUrl: string;
}

/** The dataset's rows, written by one statement straight into its table. */
const FILL = {
  sqlite: (table: string, rows: number) => `insert into ${table} (id, amount, country, day)
    with recursive n(i) as (select 1 union all select i + 1 from n where i < ${rows})
    select i, (i % 1000) / 10.0, case i % 4 when 0 then 'FR' when 1 then 'DE' when 2 then 'IT' else 'ES' end, printf('2024-%02d-%02d', i % 12 + 1, i % 28 + 1) from n`,
  postgres: (table: string, rows: number) => `insert into ${table} (id, amount, country, day)
    select i, (i % 1000) / 10.0, (array['FR', 'DE', 'IT', 'ES'])[i % 4 + 1], make_date(2024, i % 12 + 1, i % 28 + 1) from generate_series(1, ${rows}) as i`,
};

/** The physical table of a dataset, as SQL names it on each adapter. */
export function physicalTable(dialect: DialectName, dataset: { org_id: number; id: number }): string {
  return dialect === 'sqlite' ? `"org_${dataset.org_id}__ds_${dataset.id}"` : `org_${dataset.org_id}.ds_${dataset.id}`;
}

/** Writes SQL straight to the database (table fill and bookkeeping), as the caller's own connection. */
export async function execute(dialect: DialectName, databaseUrl: string, statements: string[]): Promise<void> {
  if (dialect === 'sqlite') {
    const db = new Database(databaseUrl.slice('sqlite:'.length));
    db.pragma('busy_timeout = 10000');
    for (const statement of statements) db.exec(statement);
    db.close();
    return;
  }
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  for (const statement of statements) await client.query(statement);
  await client.end();
}

export async function api(base: string, method: string, route: string, token: string | null, body?: unknown): Promise<any> {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${text.slice(0, 300)}`);
  return response.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text;
}

/**
 * A dataset of `rows` rows of BENCH_COLUMNS in the project, created through the API and filled
 * straight in its table; answers the dataset and its physical table.
 */
export async function createFilledDataset(dialect: DialectName, kernel: BenchKernel, token: string, projectId: number, name: string, rows = LONG_READ_ROWS) {
  const dataset = await api(kernel.base, 'POST', '/api/datasets', token, { name, project_id: projectId, columns: BENCH_COLUMNS });
  const table = physicalTable(dialect, dataset);
  // Analyzed on Postgres as a load through the platform leaves it (DataTables.analyze).
  const analyze = dialect === 'postgres' ? [`analyze ${table}`] : [];
  await execute(dialect, kernel.databaseUrl, [FILL[dialect](table, rows), ...analyze, `update datasets set row_count = ${rows}, version = version + 1 where id = ${dataset.id}`]);
  return { id: Number(dataset.id), org_id: Number(dataset.org_id), table, rows };
}
