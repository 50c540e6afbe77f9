import path from 'node:path';

/**
 * How long a change counter read stays good when no connection of this process wrote since: a
 * change written by another process (a second instance, a console) is seen within this long.
 */
export const OTHER_PROCESS_LAG_MS = 20;

/**
 * From this age on, counters read asynchronously (Postgres) are read again in the background while
 * the values held keep answering: under load the new read is back before the held ones reach
 * OTHER_PROCESS_LAG_MS, and no request waits for it.
 */
export const REFRESH_AHEAD_MS = 15;

/**
 * Writes made by this process to one database, through any of its connections (and any storage
 * opened on it: two kernels of one process, as tests start them, share the clock).
 */
export class WriteClock {
  private static readonly byDatabase = new Map<string, WriteClock>();
  ticks = 0;

  /** The clock of the SQLite file `file` (a database in memory is its connection's alone). */
  static ofFile(file: string): WriteClock {
    return WriteClock.of(file === ':memory:' ? `:memory:${Math.random()}` : `sqlite:${path.resolve(file)}`);
  }

  /** The clock of the database a connection string names. */
  static of(database: string): WriteClock {
    let clock = WriteClock.byDatabase.get(database);
    if (!clock) WriteClock.byDatabase.set(database, (clock = new WriteClock()));
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

/** When a counter read started: the clock's ticks and the time. */
export interface ReadStamp {
  ticks: number;
  at: number;
}

/**
 * Whether counters read earlier are still good: no write by this process since their read started,
 * and younger than OTHER_PROCESS_LAG_MS. A read is stamped *before* it runs, so a write that ended
 * while it ran makes it stale at once.
 */
export class CounterFreshness {
  private held: ReadStamp = { ticks: -1, at: 0 };

  constructor(private readonly clock: WriteClock) {}

  /** The stamp of a read about to start. */
  stamp(): ReadStamp {
    return { ticks: this.clock.ticks, at: Date.now() };
  }

  /** The values now kept were read under `stamp`. */
  hold(stamp: ReadStamp): void {
    this.held = stamp;
  }

  isFresh(): boolean {
    return this.held.ticks === this.clock.ticks && Date.now() - this.held.at < OTHER_PROCESS_LAG_MS;
  }

  /** Old enough to be read again ahead of need (REFRESH_AHEAD_MS); asked of values `isFresh` kept. */
  isAging(): boolean {
    return Date.now() - this.held.at >= REFRESH_AHEAD_MS;
  }
}

/**
 * A change counter read that is repeated only when it may have moved: after a write by any
 * connection of this process to the database, and otherwise at most every OTHER_PROCESS_LAG_MS
 * (writes by another process). A counter read opens a read transaction on the WAL, which costs
 * several times what the rest of an authenticated request's identity check does.
 */
export class CachedCounterRead {
  private readonly freshness: CounterFreshness;
  private value = 0;

  constructor(
    clock: WriteClock,
    private readonly read: () => number,
  ) {
    this.freshness = new CounterFreshness(clock);
  }

  get(): number {
    if (!this.freshness.isFresh()) {
      this.freshness.hold(this.freshness.stamp());
      this.value = this.read();
    }
    return this.value;
  }
}
