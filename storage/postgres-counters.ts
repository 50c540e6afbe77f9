import type pg from 'pg';
import { FreshSharedRead } from './change-counters.ts';
import type { PostgresListener } from './postgres-listener.ts';
import { CounterFreshness, type ChangeNotices, type WriteClock } from './write-clock.ts';

/** The channel the change counters' trigger notifies as a change commits (postgres.ts: `bump_change_counter`). */
export const CHANGE_COUNTERS_CHANNEL = 'change_counters';

/** How long after a failed LISTEN it is tried again (by the next counter read). */
const LISTEN_RETRY_MS = 1_000;

/** Statements that change nothing another connection could see: no tick after them. */
const CHANGES_NOTHING = /^\s*(select|begin)\b/i;

type QueryMethod = (...args: unknown[]) => unknown;

/**
 * Ticks `clock` once each statement of `client` that may have written has ended (autocommitted, or
 * the `commit` of its transaction), before its caller sees the result: a change counter read
 * starting after a write of this process was answered always reads the value it left. A
 * Submittable (COPY, a cursor) ticks nothing: those fill data tables and read, and no data table
 * bumps a change counter.
 */
export function tickAfterWrites(client: pg.ClientBase, clock: WriteClock): void {
  const target = client as unknown as { query: QueryMethod };
  const query = target.query;
  target.query = function (this: unknown, ...args: unknown[]) {
    const [config] = args;
    const text = typeof config === 'string' ? config : (config as { text?: unknown } | null)?.text;
    if (typeof text !== 'string' || CHANGES_NOTHING.test(text)) return query.apply(this, args);
    const last = args.length - 1;
    const callback = args[last];
    if (typeof callback === 'function') {
      args[last] = (...results: unknown[]) => {
        clock.tick();
        return callback(...results);
      };
      return query.apply(this, args);
    }
    const result = query.apply(this, args);
    return result instanceof Promise ? result.finally(() => clock.tick()) : result;
  };
}

/**
 * The change counters' notices, heard on the storage's LISTEN connection from the first counter
 * read on: a notice, or a new connection (notices sent while none listened are gone), makes every
 * read before it stale.
 */
class CounterNotices implements ChangeNotices {
  received = 0;
  private subscribed = false;
  private subscribing = false;
  private failedAt = -Infinity;

  constructor(private readonly listener: PostgresListener) {}

  get connection(): number | undefined {
    return this.subscribed ? this.listener.connection : undefined;
  }

  /** Starts listening, once (again a while after a failure: the database may be down). */
  subscribe(): void {
    if (this.subscribed || this.subscribing || Date.now() - this.failedAt < LISTEN_RETRY_MS) return;
    this.subscribing = true;
    this.listener.listen(CHANGE_COUNTERS_CHANNEL, () => (this.received += 1)).then(
      () => {
        this.subscribed = true;
        this.subscribing = false;
      },
      () => {
        this.failedAt = Date.now();
        this.subscribing = false;
      },
    );
  }
}

/**
 * The change counters of a Postgres database, all read by one query and kept while no write of
 * this process ended since and, while the database's notices of changes come and none came, for
 * at most NOTICED_LAG_MS (a change another instance or a console commits is seen as its notice
 * arrives, about a millisecond later); without notices (the LISTEN connection down), for at most
 * OTHER_PROCESS_LAG_MS, the SQLite adapter's rule. A request answered from memory asks no query.
 * Callers needing a read share one in flight only if it started after they asked
 * (FreshSharedRead). Values near their lag are read again in the background while they still
 * answer: a read waits for the database's round trip, and on a busy machine that is a pause of
 * every request of the instance when they all wait for it.
 */
export class PostgresCounters {
  private values: Map<string, number> | undefined;
  private readonly notices: CounterNotices;
  private readonly freshness: CounterFreshness;
  private readonly shared: FreshSharedRead<Map<string, number>>;

  constructor(pool: pg.Pool, clock: WriteClock, listener: PostgresListener) {
    this.notices = new CounterNotices(listener);
    this.freshness = new CounterFreshness(clock, this.notices);
    this.shared = new FreshSharedRead(async () => {
      const stamp = this.freshness.stamp();
      const { rows } = await pool.query<{ name: string; value: number }>({ name: 'change_counters', text: 'select name, value from change_counters' });
      const values = new Map(rows.map((row) => [row.name, Number(row.value)]));
      // Kept under the stamp taken before the query: a write ended or a notice heard meanwhile leaves it stale.
      this.values = values;
      this.freshness.hold(stamp);
      return values;
    });
  }

  get(counter: string): number | Promise<number> {
    if (this.values && this.freshness.isFresh()) {
      if (this.freshness.isAging() && !this.shared.reading) this.shared.get().catch(ignoreAheadOfNeed);
      return valueOf(this.values, counter);
    }
    this.notices.subscribe();
    return this.shared.get().then((values) => valueOf(values, counter));
  }
}

/** A read ahead of need that failed: the next read a caller waits for meets (and reports) the same error. */
const ignoreAheadOfNeed = () => undefined;

function valueOf(values: Map<string, number>, counter: string): number {
  const value = values.get(counter);
  if (value === undefined) throw new Error(`no change counter "${counter}" (no migration tracks it)`);
  return value;
}
