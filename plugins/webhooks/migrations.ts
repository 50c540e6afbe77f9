import type { Migration } from '../../storage/index.ts';

/** Webhook subscriptions and their deliveries. Frozen: never import current code here. */
export const webhooksMigrations: Record<string, Migration> = {
  '2026-12-02T0300_webhooks': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('webhooks'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('event_type', 'text', (c) => c.notNull())
        .addColumn('target_url', 'text', (c) => c.notNull())
        // The signing secret, sealed by the kernel's vault: never answered, never logged.
        .addColumn('secret_sealed', 'text', (c) => c.notNull())
        .addColumn('description', 'text')
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('webhooks_org_type').on('webhooks').columns(['org_id', 'event_type']).execute();
      await storage
        .addIdColumn(db.schema.createTable('webhooks_deliveries'))
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('webhook_id', 'integer', (c) => c.notNull().references('webhooks.id').onDelete('cascade'))
        // Stable across redeliveries of one event: receivers de-duplicate by it.
        .addColumn('event_id', 'text', (c) => c.notNull())
        .addColumn('event_type', 'text', (c) => c.notNull())
        // The exact body every attempt sends (and signs).
        .addColumn('body', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('last_status_code', 'integer')
        .addColumn('last_error', 'text')
        .addColumn('next_attempt_at', storage.types.timestamp)
        .addColumn('delivered_at', storage.types.timestamp)
        // 24 hours after the event: no attempt after it.
        .addColumn('deadline_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addUniqueConstraint('webhooks_deliveries_event', ['webhook_id', 'event_id'])
        .execute();
    },
    async down({ db }) {
      await db.schema.dropTable('webhooks_deliveries').execute();
      await db.schema.dropTable('webhooks').execute();
    },
  },
};
