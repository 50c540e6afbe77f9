import type { Kysely } from 'kysely';
import { beforeIdCursor, problems } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';

/** A subscription as answered: never its secret. */
export interface Webhook {
  id: number;
  event_type: string;
  target_url: string;
  description: string | null;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

/** A delivery as answered: its body is what was (or will be) sent. */
export interface Delivery {
  id: number;
  webhook_id: number;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: string | null;
  delivered_at: string | null;
  deadline_at: string;
  created_at: string;
}

/** What an attempt needs: the delivery, its subscription's target and sealed secret. */
export interface DeliveryJob extends Delivery {
  org_id: number;
  body: string;
  target_url: string;
  secret_sealed: string;
}

type WebhookRow = Webhook & { org_id: number; secret_sealed: string };

/** How long a delivery is retried after its event. */
export const DELIVERY_WINDOW_MS = 24 * 3_600_000;

/** Subscriptions and deliveries of one organization at a time: every read and write is filtered by `orgId`. */
export class WebhookStore {
  constructor(private readonly storage: Storage) {}

  async create(orgId: number, input: { event_type: string; target_url: string; secret_sealed: string; description: string | null }, userId: number): Promise<Webhook> {
    const now = this.storage.now();
    const row = (await this.storage.db
      .insertInto('webhooks')
      .values({ org_id: orgId, ...input, created_by: userId, created_at: now, updated_at: now })
      .returningAll()
      .executeTakeFirstOrThrow()) as WebhookRow;
    return answer(row);
  }

  async list(orgId: number): Promise<Webhook[]> {
    return ((await this.storage.db.selectFrom('webhooks').selectAll().where('org_id', '=', orgId).orderBy('id').execute()) as WebhookRow[]).map(answer);
  }

  async get(orgId: number, id: number): Promise<Webhook> {
    return answer(await this.row(orgId, id));
  }

  /** The subscription with its sealed secret (a ping signs with it). */
  async row(orgId: number, id: number): Promise<WebhookRow> {
    const row = (await this.storage.db.selectFrom('webhooks').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()) as WebhookRow | undefined;
    if (!row) throw problems.notFound(`no webhook ${id} in this organization`);
    return row;
  }

  async update(orgId: number, id: number, changes: Partial<{ event_type: string; target_url: string; secret_sealed: string; description: string | null }>): Promise<Webhook> {
    const updated = await this.storage.db.updateTable('webhooks').set({ ...changes, updated_at: this.storage.now() }).where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (Number(updated.numUpdatedRows) === 0) throw problems.notFound(`no webhook ${id} in this organization`);
    return this.get(orgId, id);
  }

  /** Deletes the subscription and its deliveries (a pending one is not attempted again). */
  async remove(orgId: number, id: number): Promise<void> {
    await this.storage.transaction(async (trx) => {
      await trx.deleteFrom('webhooks_deliveries').where('org_id', '=', orgId).where('webhook_id', '=', id).execute();
      const deleted = await trx.deleteFrom('webhooks').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
      if (Number(deleted.numDeletedRows) === 0) throw problems.notFound(`no webhook ${id} in this organization`);
    });
  }

  /** The organization's subscriptions to any of these event types. */
  async subscribers(orgId: number, types: string[], db: Kysely<any> = this.storage.db): Promise<{ id: number; event_type: string }[]> {
    return db.selectFrom('webhooks').select(['id', 'event_type']).where('org_id', '=', orgId).where('event_type', 'in', types).orderBy('id').execute();
  }

  /**
   * A new pending delivery of an event to a subscription, in `db`'s transaction; null when that
   * event was already given to it (an event handled again after a crash is not delivered twice).
   */
  async addDelivery(db: Kysely<any>, orgId: number, delivery: { webhook_id: number; event_id: string; event_type: string; body: string; event_at: string }): Promise<number | null> {
    const now = this.storage.now();
    const row = await db
      .insertInto('webhooks_deliveries')
      .values({
        org_id: orgId,
        webhook_id: delivery.webhook_id,
        event_id: delivery.event_id,
        event_type: delivery.event_type,
        body: delivery.body,
        status: 'pending',
        attempts: 0,
        next_attempt_at: now,
        deadline_at: new Date(Date.parse(delivery.event_at) + DELIVERY_WINDOW_MS).toISOString(),
        created_at: now,
      })
      .onConflict((oc) => oc.columns(['webhook_id', 'event_id']).doNothing())
      .returning('id')
      .executeTakeFirst();
    return row ? Number(row.id) : null;
  }

  /** A page of the subscription's deliveries, newest first. */
  async deliveries(orgId: number, webhookId: number, page: { limit: number; cursor?: string }): Promise<{ items: Delivery[]; next_cursor: string | null }> {
    let query = this.storage.db.selectFrom('webhooks_deliveries').select(DELIVERY_COLUMNS).where('org_id', '=', orgId).where('webhook_id', '=', webhookId);
    if (page.cursor !== undefined) query = query.where('id', '<', beforeIdCursor.decode(page.cursor));
    const rows = (await query.orderBy('id', 'desc').limit(page.limit + 1).execute()) as Delivery[];
    const items = rows.slice(0, page.limit);
    return { items, next_cursor: rows.length > page.limit ? beforeIdCursor.encode(items[items.length - 1].id) : null };
  }

  async delivery(orgId: number, webhookId: number, id: number): Promise<Delivery> {
    const row = (await this.storage.db.selectFrom('webhooks_deliveries').select(DELIVERY_COLUMNS).where('org_id', '=', orgId).where('webhook_id', '=', webhookId).where('id', '=', id).executeTakeFirst()) as Delivery | undefined;
    if (!row) throw problems.notFound(`no delivery ${id} of webhook ${webhookId} in this organization`);
    return row;
  }

  /** A delivery to attempt (pending, its subscription still there), with what the attempt needs. */
  async job(id: number): Promise<DeliveryJob | undefined> {
    return (await this.storage.db
      .selectFrom('webhooks_deliveries as d')
      .innerJoin('webhooks as w', 'w.id', 'd.webhook_id')
      .select([...DELIVERY_COLUMNS.map((c) => `d.${c}` as const), 'd.org_id', 'd.body', 'w.target_url', 'w.secret_sealed'])
      .where('d.id', '=', id)
      .where('d.status', '=', 'pending')
      .executeTakeFirst()) as DeliveryJob | undefined;
  }

  /**
   * Records an attempt's outcome, in `db`'s transaction, if the delivery is still pending with the
   * attempts this one followed: of two attempts racing (a lease taken over), one records and goes
   * on, so retries never fork into two chains.
   */
  async recordAttempt(db: Kysely<any>, id: number, previousAttempts: number, outcome: { status: DeliveryStatus; attempts: number; last_status_code: number | null; last_error: string | null; next_attempt_at: string | null; delivered_at: string | null }): Promise<boolean> {
    const updated = await db.updateTable('webhooks_deliveries').set(outcome).where('id', '=', id).where('status', '=', 'pending').where('attempts', '=', previousAttempts).executeTakeFirst();
    return Number(updated.numUpdatedRows) > 0;
  }

  /**
   * Puts a delivery back to pending for a new round of attempts (redeliver), with a new window from
   * now: one that ended, or one pending whose next attempt is overdue by more than `staleMs` (its
   * work was lost). Answers whether it did (false: it is pending as it should be).
   */
  async reopen(db: Kysely<any>, orgId: number, id: number, staleMs: number): Promise<boolean> {
    const now = this.storage.now();
    const stale = new Date(Date.parse(now) - staleMs).toISOString();
    const updated = await db
      .updateTable('webhooks_deliveries')
      .set({ status: 'pending', attempts: 0, next_attempt_at: now, delivered_at: null, deadline_at: new Date(Date.parse(now) + DELIVERY_WINDOW_MS).toISOString() })
      .where('org_id', '=', orgId)
      .where('id', '=', id)
      .where((eb) => eb.or([eb('status', '<>', 'pending'), eb('next_attempt_at', '<', stale)]))
      .executeTakeFirst();
    return Number(updated.numUpdatedRows) > 0;
  }
}

const DELIVERY_COLUMNS = ['id', 'webhook_id', 'event_id', 'event_type', 'status', 'attempts', 'last_status_code', 'last_error', 'next_attempt_at', 'delivered_at', 'deadline_at', 'created_at'] as const;

function answer({ org_id: _org, secret_sealed: _secret, ...row }: WebhookRow): Webhook {
  return row;
}
