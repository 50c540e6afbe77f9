import path from 'node:path';

/** How long a change counter read stays good when no connection of this process wrote since. */
export const OTHER_PROCESS_LAG_MS = 20;

/** Writes made by this process to one database file, through any of its connections. */
export class WriteClock {
  private static readonly byFile = new Map<string, WriteClock>();
  ticks = 0;

  /** The clock shared by every connection of this process to `file`. */
  static of(file: string): WriteClock {
    const key = file === ':memory:' ? `:memory:${Math.random()}` : path.resolve(file);
    let clock = WriteClock.byFile.get(key);
    if (!clock) WriteClock.byFile.set(key, (clock = new WriteClock()));
    return clock;
  }

  tick(): void {
    this.ticks += 1;
  }
}

/** Statements that make or end a write: anything not read-only, and the end of a transaction. */
export function endsOrMakesWrite(source: string, readonly: boolean): boolean {
  return !readonly || /^\s*(commit|end|release|rollback)\b/i.test(source);
}

/**
 * A change counter read that is repeated only when it may have moved: after a write by any
 * connection of this process to the file, and otherwise at most every OTHER_PROCESS_LAG_MS (writes
 * by another process: a second instance on the same file, a console). A counter read opens a read
 * transaction on the WAL, which costs several times what the rest of an authenticated request's
 * identity check does.
 */
export class CachedCounterRead {
  private seenTicks = -1;
  private readAt = 0;
  private value = 0;

  constructor(
    private readonly clock: WriteClock,
    private readonly read: () => number,
  ) {}

  get(): number {
    const now = Date.now();
    if (this.seenTicks !== this.clock.ticks || now - this.readAt >= OTHER_PROCESS_LAG_MS) {
      this.seenTicks = this.clock.ticks;
      this.readAt = now;
      this.value = this.read();
    }
    return this.value;
  }
}
