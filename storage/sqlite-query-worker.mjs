// Runs governed SQL for the SQLite adapter, off the main thread: a runaway query is stopped by
// terminating this worker, and the server keeps answering meanwhile. The connection is read-only
// and every statement must be one better-sqlite3 itself calls read-only.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { registerRegexp } from './sqlite-regexp.mjs';

const db = new Database(workerData.file, { readonly: true, fileMustExist: true });
db.pragma('busy_timeout = 5000');
registerRegexp(db);

parentPort.on('message', ({ id, sql, params, limit }) => {
  try {
    const statement = db.prepare(sql);
    if (!statement.reader || !statement.readonly) throw Object.assign(new Error('only a read-only query that returns rows is allowed'), { rejected: true });
    const names = statement.columns().map((c) => c.name);
    const named = Object.fromEntries(params.map((value, i) => [String(i + 1), value]));
    const rows = [];
    for (const row of statement.raw(true).iterate(...(params.length ? [named] : []))) {
      rows.push(row.map((v) => (typeof v === 'bigint' ? Number(v) : v)));
      if (rows.length > limit) break;
    }
    parentPort.postMessage({ id, names, rows });
  } catch (err) {
    parentPort.postMessage({ id, error: err.message, rejected: err.rejected || err.code !== undefined });
  }
});
