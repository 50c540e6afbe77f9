// Runs governed SQL for the SQLite adapter in a process of its own, on a read-only connection: a
// runaway statement is stopped by killing this process (SQLite cannot be interrupted from outside
// here, and a worker thread cannot be stopped while SQLite runs), and the server keeps answering.
// Each statement's compiled program is checked first (sqlite-governed-check.mjs).
import Database from 'better-sqlite3';
import { bindings, checkProgram, Refused, serve } from './sqlite-governed-check.mjs';
import { registerRegexp } from './sqlite-regexp.mjs';

const db = new Database(process.argv[2], { readonly: true, fileMustExist: true });
db.pragma('busy_timeout = 5000');
registerRegexp(db);

/** Rows a description judges a column's type by. */
const DESCRIBE_ROWS = 100;

/** About how many bytes a value takes in the answer. */
function size(value) {
  if (typeof value === 'string') return value.length + 2;
  if (value === null) return 4;
  if (value instanceof Uint8Array) return value.length * 2;
  return 8;
}

/** The statement, checked and prepared, inside a read transaction `work` runs in. */
function checked({ sql, params, allowed }, work) {
  const bound = bindings(params);
  // One read transaction: the program checked is the program run (the schema cannot change under it).
  db.exec('begin');
  try {
    checkProgram(db, sql, bound, allowed);
    const statement = db.prepare(sql);
    if (!statement.reader || !statement.readonly) throw new Refused('only a read-only query that returns rows is allowed');
    return work(statement, bound);
  } finally {
    db.exec('rollback');
  }
}

/** Up to `limit` rows and `maxBytes` bytes of the statement's result. */
function read(statement, bound, limit, maxBytes) {
  const names = statement.columns().map((c) => c.name);
  // Safe integers tell SQLite's INTEGER values (bigint) from its REAL ones (number), which JavaScript
  // numbers cannot: sum(amount) = 20.0 is a number column's total, not an integer.
  const integers = names.map(() => 0);
  const reals = names.map(() => 0);
  const others = names.map(() => 0);
  const rows = [];
  let bytes = 0;
  let truncated = null;
  for (const row of statement.safeIntegers(true).raw(true).iterate(...bound)) {
    if (rows.length === limit) {
      truncated = 'row_limit';
      break;
    }
    for (const value of row) bytes += size(value);
    if (bytes > maxBytes) {
      if (rows.length === 0) throw new Refused(`its first row alone is larger than the result limit (${maxBytes} bytes): select fewer or narrower columns`);
      truncated = 'byte_limit';
      break;
    }
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
  }
  // null where a column is not all numbers: the main process judges it by its values.
  const numericTypes = names.map((_, i) => (others[i] > 0 ? null : reals[i] > 0 ? 'number' : integers[i] > 0 ? 'integer' : null));
  return { names, rows, numericTypes, truncated };
}

serve((message) =>
  checked(message, (statement, bound) => {
    if (message.describe) {
      // Where a result column reads straight from a table column, that column and its declared type.
      const origins = statement.columns().map((c) => (c.table ? { table: c.table, column: c.column, declared: c.type } : null));
      return { ...read(statement, bound, DESCRIBE_ROWS, Infinity), origins };
    }
    return read(statement, bound, message.limit, message.maxBytes);
  }),
);
