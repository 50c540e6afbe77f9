import type { Migration } from '../../storage/index.ts';

/** Each user's notifications and channel preferences. Frozen: never import current code here. */
export const notificationsMigrations: Record<string, Migration> = {
  '2026-12-02T0400_notifications': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('notifications'))
        .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('org_id', 'integer')
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('title', 'text', (c) => c.notNull())
        .addColumn('body', 'text', (c) => c.notNull())
        .addColumn('link', 'text')
        // What it is about (`run:12`, `token-expiring-7d:4`): one notification per user and source, however often the event comes.
        .addColumn('source_key', 'text', (c) => c.notNull())
        // False when the user asked for e-mail only: kept (so it is not sent twice), never listed.
        .addColumn('in_inbox', 'boolean', (c) => c.notNull())
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('read_at', storage.types.timestamp)
        .addUniqueConstraint('notifications_source', ['user_id', 'source_key'])
        .execute();
      await db.schema.createIndex('notifications_inbox').on('notifications').columns(['user_id', 'id']).execute();
      await db.schema
        .createTable('notifications_preferences')
        .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('in_app', 'boolean', (c) => c.notNull())
        .addColumn('email', 'boolean', (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .addPrimaryKeyConstraint('notifications_preferences_pk', ['user_id', 'type'])
        .execute();
    },
    async down({ db }) {
      await db.schema.dropTable('notifications_preferences').execute();
      await db.schema.dropTable('notifications').execute();
    },
  },
};
