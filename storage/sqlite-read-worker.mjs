// A read worker of the SQLite adapter (sqlite-read-pool.ts): runs the statements of long reads
// (profiles, exports, pages of rows, quality runs) one at a time on a read-only connection of its
// own, off the main thread, so the server's event loop keeps answering while they run. WAL lets
// this connection read beside the main one's writes; it sees what was committed when a statement
// (or its read transaction) began. Plain JavaScript: workers start without the TypeScript loader.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { byColumn } from './by-column.mjs';
import { asBoolean, bindAll, booleanColumns } from './sqlite-portable-values.mjs';
import { registerRegexp } from './sqlite-regexp.mjs';
import { lowerThreadPriority } from './thread-priority.mjs';

// Long reads give way to the request path when the CPU is short.
lowerThreadPriority();

const db = new Database(workerData.file, { readonly: true, fileMustExist: true });
db.pragma(`busy_timeout = ${workerData.busyTimeoutMs}`);
registerRegexp(db);

const STATEMENT_CACHE_SIZE = 200;
/** Prepared statements by text (a page of rows is the same statement page after page). */
const prepared = new Map();

function prepare(sql) {
  let entry = prepared.get(sql);
  if (!entry) {
    const statement = db.prepare(sql);
    // Rows travel as arrays: cheaper to copy between threads, and a column named like an Object
    // member (`__proto__`) stays a value (the main thread makes the rows with own keys only).
    if (statement.reader) statement.raw(true);
    entry = { statement, columns: statement.reader ? statement.columns().map((c) => c.name) : [], booleans: booleanColumns(statement).map((c) => c.index) };
    if (prepared.size >= STATEMENT_CACHE_SIZE) prepared.delete(prepared.keys().next().value);
    prepared.set(sql, entry);
  }
  return entry;
}

// `columnWise`: the rows go back as one array of values per column, far cheaper to copy than an array per row.
parentPort.on('message', ({ sql, parameters, columnWise }) => {
  try {
    const { statement, columns, booleans } = prepare(sql);
    // What Kysely's SQLite driver answers: rows of a statement that returns some, the counts of
    // one that does not (BEGIN and COMMIT of a read transaction; a write fails, read-only).
    if (statement.reader) {
      const rows = statement.all(bindAll(parameters));
      if (booleans.length) for (const row of rows) for (const i of booleans) row[i] = asBoolean(row[i]);
      parentPort.postMessage(columnWise ? { columns, values: byColumn(columns.length, rows), count: rows.length } : { columns, rows });
    } else {
      const { changes } = statement.run(bindAll(parameters));
      parentPort.postMessage({ columns, rows: [], changes });
    }
  } catch (err) {
    parentPort.postMessage({ error: { message: err.message, code: err.code } });
  }
});
