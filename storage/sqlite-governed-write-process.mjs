// Writes the result of a governed statement into a table, for the SQLite adapter, in a process of
// its own (stopped by being killed, like sqlite-governed-process.mjs) on a READ-WRITE connection:
// the only one governed SQL has. What keeps the statement from writing is the check of its
// compiled program, the same check as for reads, and that of the program computing its result.
//
// The result is computed into a TEMP table first: SQLite has one writer per database file, and
// writing the temporary database leaves the main file's write lock free, so the platform's own
// writes go on while a long statement computes. The main file is written only by the final copy,
// in a transaction of its own: a process killed before it committed wrote nothing.
import Database from 'better-sqlite3';
import { bindings, checkProgram, Refused, serve } from './sqlite-governed-check.mjs';
import { registerRegexp } from './sqlite-regexp.mjs';

const db = new Database(process.argv[2], { fileMustExist: true });
db.pragma('busy_timeout = 5000');
registerRegexp(db);

const quote = (name) => `"${name.replace(/"/g, '""')}"`;
const RESULT = 'temp.governed_result';

/**
 * Refuses a program that writes the main database: a table opened for writing there (p3 = 0), or a
 * write transaction started on it (Transaction p1 = 0, p2 ≠ 0). The result table is the temporary
 * database's (p3 = 1, p1 = 1).
 */
function refuseMainWrites(sql, bound) {
  for (const op of db.prepare(`explain ${sql}`).all(...bound)) {
    if ((op.opcode === 'OpenWrite' && op.p3 === 0) || (op.opcode === 'Transaction' && op.p1 === 0 && op.p2 !== 0)) {
      throw new Refused('the statement would write the database');
    }
  }
}

function write({ sql, params, allowed, target, columns }) {
  const bound = bindings(params);
  db.exec(`drop table if exists ${RESULT}`);
  try {
    // One read transaction: the program checked is the program run (the schema cannot change under it).
    db.exec('begin');
    try {
      checkProgram(db, sql, bound, allowed);
      const statement = db.prepare(sql);
      if (!statement.reader || !statement.readonly) throw new Refused('only a read-only query that returns rows is allowed');
      const width = statement.columns().length;
      if (width !== columns.length) throw new Refused(`the query returns ${width} columns, the target table has ${columns.length}`);
      // Duplicated result names are made unique by SQLite here; the copy below matches columns by position.
      const compute = `create table ${RESULT} as ${sql}`;
      refuseMainWrites(compute, bound);
      db.prepare(compute).run(...bound);
      db.exec('commit');
    } finally {
      if (db.inTransaction) db.exec('rollback');
    }
    // Only now the main file's write lock, for the copy alone (IMMEDIATE: taken at once, waited for under busy_timeout).
    db.exec('begin immediate');
    try {
      const { changes } = db.prepare(`insert into main.${quote(target)} (${columns.map(quote).join(', ')}) select * from ${RESULT}`).run();
      db.exec('commit');
      return { written: changes };
    } finally {
      if (db.inTransaction) db.exec('rollback');
    }
  } finally {
    db.exec(`drop table if exists ${RESULT}`);
  }
}

serve(write);
