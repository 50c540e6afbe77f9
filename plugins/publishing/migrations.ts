import type { Migration } from '../../storage/index.ts';

/** The change counter of what a call of the service path reads: services and keys. */
export const PUBLISHING_COUNTER = 'publishing';

const PUBLISHING_TRACKED = [
  { table: 'publishing_services' },
  { table: 'publishing_keys', columns: ['org_id', 'service_id', 'name', 'key_hash', 'key_prefix', 'allowed_endpoints', 'fixed_params', 'rate_limit_per_min', 'expires_at', 'created_by', 'revoked_at'] },
];

/** API Services and their data API keys. Frozen: never import current code here. */
export const publishingMigrations: Record<string, Migration> = {
  '2026-11-27T2000_publishing': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('publishing_services'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('project_id', 'integer', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        // The URL segment of /api/service/{key}/…: unique on the platform.
        .addColumn('key', 'text', (c) => c.notNull().unique())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('endpoints', storage.types.json, (c) => c.notNull())
        .addColumn('published_by', 'integer')
        .addColumn('published_at', storage.types.timestamp)
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('publishing_services_org').on('publishing_services').columns(['org_id', 'project_id']).execute();
      await storage
        .addIdColumn(db.schema.createTable('publishing_keys'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('service_id', 'integer', (c) => c.notNull().references('publishing_services.id').onDelete('cascade'))
        .addColumn('name', 'text', (c) => c.notNull())
        // A keyed HMAC-SHA256 of the secret (as PATs are kept); the secret itself is never stored.
        .addColumn('key_hash', 'text', (c) => c.notNull().unique())
        .addColumn('key_prefix', 'text', (c) => c.notNull())
        .addColumn('allowed_endpoints', storage.types.json)
        .addColumn('fixed_params', storage.types.json, (c) => c.notNull())
        .addColumn('rate_limit_per_min', 'integer')
        .addColumn('expires_at', storage.types.timestamp)
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('last_used_at', storage.types.timestamp)
        .addColumn('revoked_at', storage.types.timestamp)
        .execute();
      await db.schema.createIndex('publishing_keys_service').on('publishing_keys').column('service_id').execute();
    },
    async down({ db }) {
      await db.schema.dropTable('publishing_keys').execute();
      await db.schema.dropTable('publishing_services').execute();
    },
  },
  '2026-11-27T2100_publishing_publisher_scopes': {
    // The scopes of the token the publisher published with (null: the publisher's full permissions).
    async up({ db, storage }) {
      await db.schema.alterTable('publishing_services').addColumn('published_scopes', storage.types.json).execute();
    },
    async down({ db }) {
      await db.schema.alterTable('publishing_services').dropColumn('published_scopes').execute();
    },
  },
  '2026-11-27T2300_publishing_usage': {
    // Calls of the service path by the minute: one row per service, minute, key, endpoint and
    // latency bucket, which every instance's flushes add into. Times are epoch milliseconds.
    async up({ db, storage }) {
      await db.schema
        .createTable('publishing_usage')
        .addColumn('service_id', 'integer', (c) => c.notNull().references('publishing_services.id').onDelete('cascade'))
        .addColumn('minute', storage.types.bigint, (c) => c.notNull())
        .addColumn('key_id', 'integer', (c) => c.notNull().references('publishing_keys.id').onDelete('cascade'))
        // '' for a name the service has no endpoint of.
        .addColumn('endpoint', 'text', (c) => c.notNull())
        .addColumn('bucket', 'integer', (c) => c.notNull())
        .addColumn('calls', storage.types.bigint, (c) => c.notNull())
        .addColumn('errors', storage.types.bigint, (c) => c.notNull())
        .addColumn('last_call_at', storage.types.bigint, (c) => c.notNull())
        .addPrimaryKeyConstraint('publishing_usage_pk', ['service_id', 'minute', 'key_id', 'endpoint', 'bucket'])
        .execute();
    },
    async down({ db }) {
      await db.schema.dropTable('publishing_usage').execute();
    },
  },
  '2026-11-28T0000_publishing_change_counter': {
    // Services and keys as calls see them are kept in memory until this counter moves; a key's
    // last_used_at (stamped as it is used) is no change of what a call may do.
    async up({ db, storage }) {
      await storage.trackChanges(db, PUBLISHING_COUNTER, PUBLISHING_TRACKED);
    },
    async down({ db, storage }) {
      await storage.untrackChanges(db, PUBLISHING_COUNTER, PUBLISHING_TRACKED);
    },
  },
};
