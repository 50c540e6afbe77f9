// Writes the result of a governed statement into a table, for the SQLite adapter, in a process of
// its own (stopped by being killed, like sqlite-governed-process.mjs) on a READ-WRITE connection:
// the only one governed SQL has. What keeps the statement from writing is the check of its
// compiled program, the same check as for reads, and that of the program computing its result.
//
// The result is computed into a TEMP table first: SQLite has one writer per database file, and
// writing the temporary database leaves the main file's write lock free, so the platform's own
// writes go on while a long statement computes. The main file is written only by the copy into
// the target (a staging table no one reads until the platform swaps it in), in transactions of
// COPY_CHUNK_ROWS rows with a pause between them: the main connection, whose writes wait for the
// lock on the event loop, never waits for a whole copy. A process killed mid-copy leaves a partial
// staging table, which the platform drops.
//
// The process also drops tables the platform no longer uses (a dataset's replaced rows): freeing
// a big table's pages takes tens of ms, here rather than on the server's event loop.
import Database from 'better-sqlite3';
import { bindings, checkProgram, Refused, serve } from './sqlite-governed-check.mjs';
import { registerRegexp } from './sqlite-regexp.mjs';

const db = new Database(process.argv[2], { fileMustExist: true });
db.pragma('busy_timeout = 5000');
// As the main connection: a commit is durable once the WAL is checkpointed (a staging table's chunk needs no more).
db.pragma('synchronous = NORMAL');
// Checkpoints are the server's checkpointer thread's (sqlite-checkpointer.ts), not each chunk's
// commit past 1000 pages of WAL: a checkpoint (and its fsync) per chunk made a copy twice as slow.
db.pragma('wal_autocheckpoint = 0');
registerRegexp(db);

const quote = (name) => `"${name.replace(/"/g, '""')}"`;
const RESULT = 'temp.governed_result';
/** Rows copied into the target per transaction: about 10 ms of holding the write lock. */
const COPY_CHUNK_ROWS = 25_000;
/** The pause between two chunks, in which a waiting connection takes the lock. */
const COPY_PAUSE_MS = 2;
const pause = new Int32Array(new SharedArrayBuffer(4));

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
    return { written: copyInChunks(target, columns) };
  } finally {
    db.exec(`drop table if exists ${RESULT}`);
  }
}

/** Copies the result into the main file's `target` (rowids 1…n, as CREATE TABLE AS numbers them), chunk after chunk. */
function copyInChunks(target, columns) {
  const { last } = db.prepare(`select coalesce(max(rowid), 0) as last from ${RESULT}`).get();
  const copy = db.prepare(`insert into main.${quote(target)} (${columns.map(quote).join(', ')}) select * from ${RESULT} where rowid > ? and rowid <= ? order by rowid`);
  let written = 0;
  for (let from = 0; from < last; from += COPY_CHUNK_ROWS) {
    if (from > 0) Atomics.wait(pause, 0, 0, COPY_PAUSE_MS);
    // The main file's write lock, for this chunk alone (IMMEDIATE: taken at once, waited for under busy_timeout).
    db.exec('begin immediate');
    try {
      written += copy.run(from, from + COPY_CHUNK_ROWS).changes;
      db.exec('commit');
    } finally {
      if (db.inTransaction) db.exec('rollback');
    }
  }
  return written;
}

/** A table the platform no longer uses, dropped (a name the platform gave, never a statement's). */
function drop(table) {
  db.exec(`drop table if exists main.${quote(table)}`);
  return { written: 0 };
}

serve((message) => (message.drop !== undefined ? drop(message.drop) : write(message)));
