import path from 'node:path';

/**
 * How long a change counter read stays good when no connection of this process wrote since: a
 * change written by another process (a second instance, a console) is seen within this long.
 */
export const OTHER_PROCESS_LAG_MS = 20;

/**
 * How long it stays good when the database tells this process of every change committed
 * (`ChangeNotices`) and none came: a change is then seen as its notice arrives, and this long after
 * at most should a notice be lost without the connection saying so (a network that drops silently).
 */
export const NOTICED_LAG_MS = 1_000;

/**
 * From these ages on, counters read asynchronously (Postgres) are read again in the background
 * while the values held keep answering: under load the new read is back before the held ones
 * reach their lag, and no request waits for it.
 */
export const REFRESH_AHEAD_MS = 15;
export const NOTICED_REFRESH_AHEAD_MS = 900;

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

/** Notices of changes other processes committed, where the database sends them (Postgres: LISTEN). */
export interface ChangeNotices {
  /** Which connection notices arrive on now; undefined while none does (none may be trusted then). */
  readonly connection: number | undefined;
  /** How many notices came so far: any notice makes every read before it stale. */
  readonly received: number;
}

/** When a counter read started: the clock's ticks, the time, and the notices heard then. */
export interface ReadStamp {
  ticks: number;
  at: number;
  connection: number | undefined;
  received: number;
}

/**
 * Whether counters read earlier are still good: no write by this process since their read started,
 * and younger than OTHER_PROCESS_LAG_MS — or, while notices of other processes' changes come on the
 * connection they came on when the read started, no notice since and younger than NOTICED_LAG_MS.
 * A read is stamped *before* it runs, so a write that ended, or a notice that came, while it ran
 * makes it stale at once.
 */
export class CounterFreshness {
  private held: ReadStamp = { ticks: -1, at: 0, connection: undefined, received: 0 };

  constructor(
    private readonly clock: WriteClock,
    private readonly notices?: ChangeNotices,
  ) {}

  /** The stamp of a read about to start. */
  stamp(): ReadStamp {
    return { ticks: this.clock.ticks, at: Date.now(), connection: this.notices?.connection, received: this.notices?.received ?? 0 };
  }

  /** The values now kept were read under `stamp`. */
  hold(stamp: ReadStamp): void {
    this.held = stamp;
  }

  isFresh(): boolean {
    if (this.held.ticks !== this.clock.ticks) return false;
    const age = Date.now() - this.held.at;
    if (this.heard()) return this.notices!.received === this.held.received && age < NOTICED_LAG_MS;
    return age < OTHER_PROCESS_LAG_MS;
  }

  /** Old enough to be read again ahead of need; asked of values `isFresh` kept. */
  isAging(): boolean {
    return Date.now() - this.held.at >= (this.heard() ? NOTICED_REFRESH_AHEAD_MS : REFRESH_AHEAD_MS);
  }

  /** Whether notices came on one connection all along since the held read started: any change since then was heard of. */
  private heard(): boolean {
    return this.held.connection !== undefined && this.notices!.connection === this.held.connection;
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
