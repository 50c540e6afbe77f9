// The priority of a worker thread, set from inside it. Plain JavaScript: worker threads start
// before any TypeScript loader exists.
import fs from 'node:fs';
import os from 'node:os';

/** Niceness of background threads and processes (long reads, query processes, recipe handlers). */
export const BACKGROUND_NICENESS = 10;

/**
 * Lowers the calling thread's priority to `niceness`, so that the event loop is served first when
 * the CPU is short. Linux names a thread by its own id (/proc/thread-self); elsewhere, or where it
 * is not allowed, the thread keeps the process's priority.
 */
export function lowerThreadPriority(niceness = BACKGROUND_NICENESS) {
  try {
    const thread = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
    os.setPriority(thread, niceness);
  } catch {
    // no /proc/thread-self, or not allowed: the default priority
  }
}
