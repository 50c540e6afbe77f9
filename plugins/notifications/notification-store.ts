import type { Kysely } from 'kysely';
import { beforeIdCursor, problems } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import { NOTIFICATION_TYPES } from './notification-types.ts';

export interface Notification {
  id: number;
  type: string;
  org_id: number | null;
  title: string;
  body: string;
  link: string | null;
  created_at: string;
  read_at: string | null;
}

/** A notification to make: for whom, about what (`source_key`: one per user and source). */
export interface NewNotification {
  user_id: number;
  org_id: number | null;
  type: string;
  title: string;
  body: string;
  link: string | null;
  source_key: string;
}

export interface Preference {
  type: string;
  description: string;
  in_app: boolean;
  email: boolean;
}

const COLUMNS = ['id', 'type', 'org_id', 'title', 'body', 'link', 'created_at', 'read_at'] as const;

/** Each user's notifications and preferences: every read and write is filtered by the user. */
export class NotificationStore {
  constructor(private readonly storage: Storage) {}

  /** Adds the notification unless the user has one of that source already; answers its id, or null. */
  async add(db: Kysely<any>, notification: NewNotification, inInbox: boolean): Promise<number | null> {
    const row = await db
      .insertInto('notifications')
      .values({ ...notification, in_inbox: inInbox, created_at: this.storage.now() })
      .onConflict((oc) => oc.columns(['user_id', 'source_key']).doNothing())
      .returning('id')
      .executeTakeFirst();
    return row ? Number(row.id) : null;
  }

  /** A page of the user's inbox, newest first; `unread`: only those not read. */
  async inbox(userId: number, page: { unread: boolean; limit: number; cursor?: string }): Promise<{ items: Notification[]; next_cursor: string | null }> {
    let query = this.storage.db.selectFrom('notifications').select(COLUMNS).where('user_id', '=', userId).where('in_inbox', '=', true);
    if (page.unread) query = query.where('read_at', 'is', null);
    if (page.cursor !== undefined) query = query.where('id', '<', beforeIdCursor.decode(page.cursor));
    const rows = (await query.orderBy('id', 'desc').limit(page.limit + 1).execute()) as Notification[];
    const items = rows.slice(0, page.limit);
    return { items, next_cursor: rows.length > page.limit ? beforeIdCursor.encode(items[items.length - 1].id) : null };
  }

  async unreadCount(userId: number): Promise<number> {
    const { n } = await this.storage.db.selectFrom('notifications').select((eb) => eb.fn.countAll<number>().as('n')).where('user_id', '=', userId).where('in_inbox', '=', true).where('read_at', 'is', null).executeTakeFirstOrThrow();
    return Number(n);
  }

  /** Marks one of the user's notifications read (again: it keeps its first read time). */
  async markRead(userId: number, id: number): Promise<Notification> {
    await this.storage.db.updateTable('notifications').set({ read_at: this.storage.now() }).where('user_id', '=', userId).where('id', '=', id).where('in_inbox', '=', true).where('read_at', 'is', null).execute();
    return this.get(userId, id);
  }

  async markAllRead(userId: number): Promise<number> {
    const updated = await this.storage.db.updateTable('notifications').set({ read_at: this.storage.now() }).where('user_id', '=', userId).where('in_inbox', '=', true).where('read_at', 'is', null).executeTakeFirst();
    return Number(updated.numUpdatedRows);
  }

  /**
   * Takes the notification out of the inbox. Its row stays, hidden, so that an event delivered
   * again does not bring it back.
   */
  async remove(userId: number, id: number): Promise<void> {
    const updated = await this.storage.db.updateTable('notifications').set({ in_inbox: false }).where('user_id', '=', userId).where('id', '=', id).where('in_inbox', '=', true).executeTakeFirst();
    if (Number(updated.numUpdatedRows) === 0) throw problems.notFound(`no notification ${id} in your inbox`);
  }

  async get(userId: number, id: number): Promise<Notification> {
    const row = (await this.storage.db.selectFrom('notifications').select(COLUMNS).where('user_id', '=', userId).where('id', '=', id).where('in_inbox', '=', true).executeTakeFirst()) as Notification | undefined;
    if (!row) throw problems.notFound(`no notification ${id} in your inbox`);
    return row;
  }

  /** A notification with its recipient, for its e-mail. */
  async forMail(id: number): Promise<(Notification & { user_id: number }) | undefined> {
    return (await this.storage.db.selectFrom('notifications').select([...COLUMNS, 'user_id']).where('id', '=', id).executeTakeFirst()) as (Notification & { user_id: number }) | undefined;
  }

  /** Every type with the user's channels (the type's defaults where they never chose). */
  async preferences(userId: number, db: Kysely<any> = this.storage.db): Promise<Preference[]> {
    const rows = await db.selectFrom('notifications_preferences').select(['type', 'in_app', 'email']).where('user_id', '=', userId).execute();
    const chosen = new Map(rows.map((r) => [r.type, { in_app: Boolean(r.in_app), email: Boolean(r.email) }]));
    return Object.entries(NOTIFICATION_TYPES).map(([type, { description, in_app, email }]) => ({ type, description, ...(chosen.get(type) ?? { in_app, email }) }));
  }

  async setPreferences(userId: number, choices: { type: string; in_app: boolean; email: boolean }[]): Promise<Preference[]> {
    const now = this.storage.now();
    await this.storage.transaction(async (trx) => {
      for (const choice of choices) {
        await trx
          .insertInto('notifications_preferences')
          .values({ user_id: userId, ...choice, updated_at: now })
          .onConflict((oc) => oc.columns(['user_id', 'type']).doUpdateSet({ in_app: choice.in_app, email: choice.email, updated_at: now }))
          .execute();
      }
    });
    return this.preferences(userId);
  }
}
