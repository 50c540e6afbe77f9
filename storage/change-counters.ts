import { sql, type Kysely } from 'kysely';
import type { TrackedTable } from './types.ts';

const COUNTER_NAME = /^[a-z][a-z0-9_]{0,40}$/;

/** Counter names end up in trigger names and SQL text: plain lower-case identifiers only. */
export function checkCounterName(counter: string): string {
  if (!COUNTER_NAME.test(counter)) throw new Error(`change counter name "${counter}" must be a lower-case identifier`);
  return counter;
}

export const CREATE_COUNTERS_TABLE = 'create table if not exists change_counters (name text primary key, value bigint not null default 0)';

/** True when no counter is left, so a migration's down step can remove the table it created. */
export async function isLastCounterGone(db: Kysely<any>): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`select count(*) as n from change_counters`.execute(db);
  return Number(rows[0].n) === 0;
}

/** The write events that count for a tracked table: inserts, deletes, and updates of its columns. */
export function changeEvents(tracked: TrackedTable, quote: (name: string) => string): { name: string; clause: string }[] {
  const update = tracked.columns?.length ? `update of ${tracked.columns.map(quote).join(', ')}` : 'update';
  return [
    { name: 'insert', clause: 'insert' },
    { name: 'delete', clause: 'delete' },
    { name: 'update', clause: update },
  ];
}

const noop = () => undefined;

/**
 * One database read shared by concurrent callers, without ever answering a caller with a read that
 * started before it called: callers arriving while a read is in flight wait for the next read,
 * which starts when the current one ends and serves all of them at once.
 */
export class FreshSharedRead<T> {
  private inFlight: Promise<T> | null = null;
  private queued: Promise<T> | null = null;

  constructor(private readonly read: () => Promise<T>) {}

  /** Whether a read is in flight. */
  get reading(): boolean {
    return this.inFlight !== null;
  }

  get(): Promise<T> {
    if (!this.inFlight) return this.start();
    this.queued ??= this.inFlight.then(noop, noop).then(() => {
      this.queued = null;
      return this.start();
    });
    return this.queued;
  }

  private start(): Promise<T> {
    const read = this.read().finally(() => {
      if (this.inFlight === read) this.inFlight = null;
    });
    this.inFlight = read;
    return read;
  }
}
