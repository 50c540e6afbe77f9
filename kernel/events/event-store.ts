import type { Kysely } from 'kysely';
import type { Storage } from '../../storage/index.ts';

/** A domain event as stored in the outbox and handed to subscribers. */
export interface PlatformEvent {
  /** Increasing in commit order: a subscriber that saw id N has seen every event before it. */
  id: number;
  /** Dotted name, e.g. `datasets.deleted`. */
  type: string;
  org_id: number | null;
  payload: unknown;
  /** Id of the plugin that published it. */
  publisher: string;
  created_at: string;
}

export interface NewEvent {
  type: string;
  orgId: number | null;
  payload?: unknown;
}

export interface EventQuery {
  /** Events after this id (0: from the oldest kept). */
  after: number;
  types?: string[];
  orgId?: number;
  limit: number;
}

/** The channel that wakes dispatchers when events commit. */
export const EVENT_CHANNEL = 'platform_events';
/** Held by every publishing transaction until it commits, so ids are handed out in commit order. */
const OUTBOX_LOCK = 'event_outbox';

/** The outbox and the subscribers' positions in it: every statement that reads or changes them. */
export class EventStore {
  constructor(private readonly storage: Storage) {}

  /**
   * Writes the event in `db`'s transaction (a transaction of its own when `db` is not one): it
   * exists exactly when the change it reports does. Publishers queue behind one lock until they
   * commit: otherwise an id handed out first could commit last, after a subscriber read past it.
   */
  async publish(db: Kysely<any>, publisher: string, event: NewEvent): Promise<number> {
    if (!db.isTransaction) return this.storage.transaction((trx) => this.publish(trx, publisher, event));
    const { storage } = this;
    await storage.lockForTransaction(db as never, OUTBOX_LOCK);
    const row = await db
      .insertInto('event_outbox')
      .values({ type: event.type, org_id: event.orgId, payload: storage.encodeJson(event.payload ?? null), publisher, created_at: storage.now() })
      .returning('id')
      .executeTakeFirstOrThrow();
    await storage.notify(db, EVENT_CHANNEL);
    return Number(row.id);
  }

  async read(query: EventQuery): Promise<PlatformEvent[]> {
    let select = this.storage.db.selectFrom('event_outbox').selectAll().where('id', '>', query.after).orderBy('id').limit(query.limit);
    if (query.types) select = query.types.length ? select.where('type', 'in', query.types) : select.where(({ lit }) => lit(false));
    if (query.orgId !== undefined) select = select.where('org_id', '=', query.orgId);
    return (await select.execute()).map((row) => ({
      id: Number(row.id),
      type: row.type,
      org_id: row.org_id === null ? null : Number(row.org_id),
      payload: this.storage.decodeJson(row.payload),
      publisher: row.publisher,
      created_at: row.created_at,
    }));
  }

  async newestId(): Promise<number> {
    const row = await this.storage.db.selectFrom('event_outbox').select((eb) => eb.fn.max('id').as('id')).executeTakeFirst();
    return Number(row?.id ?? 0);
  }

  /**
   * Leases a subscriber's position to `owner` (created at `start` the first time), unless another
   * instance holds an unexpired lease on it. Answers the position, or null when it is taken.
   */
  async lease(subscriber: string, owner: string, start: number, leaseUntil: string): Promise<number | null> {
    return this.bookkeeping((db) => this.leaseIn(db, subscriber, owner, start, leaseUntil));
  }

  private async leaseIn(db: Kysely<any>, subscriber: string, owner: string, start: number, leaseUntil: string): Promise<number | null> {
    const now = this.storage.now();
    await db
      .insertInto('event_subscriptions')
      .values({ subscriber, position: start, failures: 0, updated_at: now })
      .onConflict((oc) => oc.column('subscriber').doNothing())
      .execute();
    const row = await db
      .updateTable('event_subscriptions')
      .set({ lease_owner: owner, lease_expires_at: leaseUntil })
      .where('subscriber', '=', subscriber)
      .where((eb) => eb.or([eb('lease_owner', 'is', null), eb('lease_owner', '=', owner), eb('lease_expires_at', '<', now)]))
      .returning('position')
      .executeTakeFirst();
    return row ? Number(row.position) : null;
  }

  /** Moves a subscriber past an event it handled (or gave up on), if `owner` still holds it. */
  async advance(subscriber: string, owner: string, position: number, skipped: string | null = null): Promise<boolean> {
    const result = await this.bookkeeping((db) =>
      db
        .updateTable('event_subscriptions')
        .set({ position, failures: 0, last_error: skipped, updated_at: this.storage.now() })
        .where('subscriber', '=', subscriber)
        .where('lease_owner', '=', owner)
        .executeTakeFirst(),
    );
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Positions and leases commit lazily (see Storage.commitLazily): one lost in a crash of the
   * database server only means an event delivered again, which at-least-once delivery allows.
   */
  private bookkeeping<T>(work: (db: Kysely<any>) => Promise<T>): Promise<T> {
    return this.storage.transaction(async (trx) => {
      await this.storage.commitLazily(trx);
      return work(trx);
    });
  }

  /** Counts a failed delivery of the event after the subscriber's position; answers the failures so far. */
  async failed(subscriber: string, owner: string, error: string): Promise<number> {
    const row = await this.storage.db
      .updateTable('event_subscriptions')
      .set((eb) => ({ failures: eb('failures', '+', 1), last_error: error, updated_at: this.storage.now() }))
      .where('subscriber', '=', subscriber)
      .where('lease_owner', '=', owner)
      .returning('failures')
      .executeTakeFirst();
    return Number(row?.failures ?? 0);
  }

  async release(subscriber: string, owner: string): Promise<void> {
    await this.storage.db.updateTable('event_subscriptions').set({ lease_owner: null, lease_expires_at: null }).where('subscriber', '=', subscriber).where('lease_owner', '=', owner).execute();
  }

  /** Drops events older than `before`; answers how many. */
  async prune(before: string): Promise<number> {
    const result = await this.storage.db.deleteFrom('event_outbox').where('created_at', '<', before).executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
