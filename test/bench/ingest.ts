/**
 * Ingest and read benchmark (issue 4), run by test/bench/run.ts in the same run as the others:
 * a generated 1,000,000-row, 10-column CSV uploaded through the API, against the raw driver
 * (better-sqlite3: a prepared insert of pre-parsed rows in one transaction), with the server's
 * peak RSS; and the throughput of GET /rows pages.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import Database from 'better-sqlite3';

export const INGEST_ROWS = Number(process.env.BENCH_INGEST_ROWS ?? 1_000_000);
const COLUMNS = ['id', 'customer', 'country', 'amount', 'quantity', 'paid', 'day', 'created_at', 'note', 'score'];

function row(i: number): string {
  const day = `2024-${String((i % 12) + 1).padStart(2, '0')}-${String((i % 28) + 1).padStart(2, '0')}`;
  return [i, `customer ${i % 5000}`, ['FR', 'DE', 'IT', 'ES'][i % 4], (i % 1000) / 10, i % 17, i % 2 === 0, day, `${day}T12:34:56Z`, `note ${i}`, (i * 7919) % 100_000].join(',');
}

/** Writes the CSV file; returns its size in bytes. */
export function writeCsv(file: string, rows = INGEST_ROWS): number {
  const fd = fs.openSync(file, 'w');
  fs.writeSync(fd, `${COLUMNS.join(',')}\n`);
  const chunk: string[] = [];
  for (let i = 1; i <= rows; i += 1) {
    chunk.push(row(i));
    if (chunk.length === 10_000) {
      fs.writeSync(fd, `${chunk.join('\n')}\n`);
      chunk.length = 0;
    }
  }
  if (chunk.length) fs.writeSync(fd, `${chunk.join('\n')}\n`);
  fs.closeSync(fd);
  return fs.statSync(file).size;
}

/** The raw driver baseline: rows parsed beforehand (not timed), inserted by one prepared statement in one transaction. */
export function rawSqliteInsertSeconds(dir: string, rows = INGEST_ROWS): number {
  const parsed = Array.from({ length: rows }, (_, i) => {
    const fields = row(i + 1).split(',');
    return [Number(fields[0]), fields[1], fields[2], Number(fields[3]), Number(fields[4]), fields[5] === 'true' ? 1 : 0, fields[6], fields[7], fields[8], Number(fields[9])];
  });
  const db = new Database(path.join(dir, 'raw.db'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(`create table t (_row_id integer primary key autoincrement, ${COLUMNS.map((c) => `"${c}"`).join(', ')})`);
  const insert = db.prepare(`insert into t (${COLUMNS.map((c) => `"${c}"`).join(', ')}) values (${COLUMNS.map(() => '?').join(', ')})`);
  const started = performance.now();
  db.transaction(() => {
    for (const values of parsed) insert.run(values);
  })();
  const seconds = (performance.now() - started) / 1000;
  db.close();
  return seconds;
}

const AGGREGATE = 'select country, count(*) as n, avg(amount) as mean_amount, max(score) as top_score from {table} group by country order by country';
const SQL_RUNS = 20;

/**
 * A simple aggregate through POST /api/sql against the same query run directly on the database
 * file by better-sqlite3, one query at a time each: the milliseconds of a query, and their ratio.
 */
export async function sqlAggregate(base: string, token: string, databaseFile: string, table: string) {
  const api = async () => {
    const response = await fetch(`${base}/api/sql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sql: AGGREGATE.replace('{table}', 'bench_rows') }),
    });
    if (!response.ok) throw new Error(`POST /api/sql: ${response.status} ${await response.text()}`);
    await response.json();
  };
  await api(); // warm-up
  let started = performance.now();
  for (let i = 0; i < SQL_RUNS; i += 1) await api();
  const apiMs = (performance.now() - started) / SQL_RUNS;
  const db = new Database(databaseFile, { readonly: true });
  const statement = db.prepare(AGGREGATE.replace('{table}', `"${table}"`));
  statement.all();
  started = performance.now();
  for (let i = 0; i < SQL_RUNS; i += 1) statement.all();
  const directMs = (performance.now() - started) / SQL_RUNS;
  db.close();
  return { api_ms: Math.round(apiMs * 10) / 10, direct_ms: Math.round(directMs * 10) / 10, ratio_direct_vs_api: Math.round((directMs / apiMs) * 100) / 100 };
}

/**
 * The Postgres baseline: pre-parsed rows (not timed) sent by COPY FROM STDIN into a fresh table,
 * in chunks of about a megabyte (a write per line would measure system calls, not Postgres).
 */
export async function rawPostgresCopySeconds(databaseUrl: string, rows = INGEST_ROWS): Promise<number> {
  const { default: pg } = await import('pg');
  const { from: copyFrom } = await import('pg-copy-streams');
  const { pipeline } = await import('node:stream/promises');
  const chunks: string[] = [];
  for (let i = 1, chunk = ''; i <= rows; i += 1) {
    chunk += `${row(i)}\n`;
    if (chunk.length >= 1 << 20 || i === rows) {
      chunks.push(chunk);
      chunk = '';
    }
  }
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('drop table if exists bench_raw_copy');
    await client.query(
      'create table bench_raw_copy (_row_id bigint generated by default as identity primary key, id bigint, customer text, country text, amount double precision, quantity bigint, paid boolean, day date, created_at timestamptz, note text, score bigint)',
    );
    const started = performance.now();
    await pipeline(Readable.from(chunks), client.query(copyFrom(`copy bench_raw_copy (${COLUMNS.join(', ')}) from stdin with (format csv)`)));
    const seconds = (performance.now() - started) / 1000;
    await client.query('drop table bench_raw_copy');
    return seconds;
  } finally {
    await client.end();
  }
}

/** Peak resident set size of a process, from /proc (Linux). */
export function peakRssMb(pid: number): number | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /VmHWM:\s+(\d+) kB/.exec(status)?.[1];
    return kb ? Math.round(Number(kb) / 1024) : null;
  } catch {
    return null;
  }
}

/** Uploads the file through the API as a stream; answers the seconds it took and the server's answer. */
export async function uploadCsv(base: string, token: string, datasetId: number, file: string): Promise<{ seconds: number; rows: number }> {
  const started = performance.now();
  const response = await fetch(`${base}/api/datasets/${datasetId}/data?mode=replace`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'text/csv' },
    body: Readable.toWeb(fs.createReadStream(file)) as ReadableStream,
    duplex: 'half',
  } as RequestInit);
  const body = (await response.json()) as { rows_loaded?: number };
  if (!response.ok) throw new Error(`upload failed: ${response.status} ${JSON.stringify(body)}`);
  return { seconds: (performance.now() - started) / 1000, rows: body.rows_loaded ?? 0 };
}
