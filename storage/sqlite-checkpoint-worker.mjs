// The SQLite adapter's checkpointer (sqlite-checkpointer.ts): a thread with a connection of its own
// that copies the WAL's committed pages back into the database file every `intervalMs`. Plain
// JavaScript: workers start without the TypeScript loader.
import { workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { lowerThreadPriority } from './thread-priority.mjs';

// Copying a million rows' pages is background work: the event loop is served first.
lowerThreadPriority();

const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('wal_autocheckpoint = 0');

// PASSIVE: as many pages as no reader still needs, without waiting for readers or writers; a
// database briefly locked (a schema change in progress) is tried again at the next tick.
setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // SQLITE_BUSY and the like: the next tick.
  }
}, workerData.intervalMs);
