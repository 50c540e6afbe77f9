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
    // Safe integers tell SQLite's INTEGER values (bigint) from its REAL ones (number), which JavaScript
    // numbers cannot: sum(amount) = 20.0 is a number column's total, not an integer.
    const integers = names.map(() => 0);
    const reals = names.map(() => 0);
    const others = names.map(() => 0);
    const rows = [];
    for (const row of statement.safeIntegers(true).raw(true).iterate(...(params.length ? [named] : []))) {
      rows.push(
        row.map((v, i) => {
          if (typeof v === 'bigint') {
            integers[i] += 1;
            return Number(v);
          }
          if (typeof v === 'number') reals[i] += 1;
          else if (v !== null) others[i] += 1;
          return v;
        }),
      );
      if (rows.length > limit) break;
    }
    // null where a column is not all numbers: the main thread judges it by its values.
    const numericTypes = names.map((_, i) => (others[i] > 0 ? null : reals[i] > 0 ? 'number' : integers[i] > 0 ? 'integer' : null));
    parentPort.postMessage({ id, names, rows, numericTypes });
  } catch (err) {
    parentPort.postMessage({ id, error: err.message, rejected: err.rejected || err.code !== undefined });
  }
});
