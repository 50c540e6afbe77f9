import type { Migration, TrackedTable } from '../../storage/index.ts';

/** The counter the identity snapshot is checked against (kernel/identity/identity-snapshot.ts). */
export const IDENTITY_COUNTER = 'identity';

/** The counter the per-organization plugin switches are checked against (kernel/registry/enablement.ts). */
export const PLUGIN_ENABLEMENT_COUNTER = 'plugin_enablement';

/** Every table the request path reads identity from; a token's `last_used_at` stamp is not a change. */
const IDENTITY_TABLES: TrackedTable[] = [
  { table: 'users' },
  { table: 'organizations' },
  { table: 'organization_members' },
  { table: 'groups' },
  { table: 'group_capabilities' },
  { table: 'group_members' },
  { table: 'personal_access_tokens', columns: ['user_id', 'token_hash', 'hash_kind', 'scopes', 'expires_at', 'revoked_at'] },
];

/**
 * The kernel's own tables: the identity every request is resolved against (auth and tenancy are
 * kernel services). Frozen in time: a change is a new migration, never an edit of an applied one.
 */
export const kernelMigrations: Record<string, Migration> = {
  '2026-11-21T0000_identity': {
    async up({ db, storage }) {
      const { types } = storage;
      await storage
        .addIdColumn(db.schema.createTable('organizations'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .execute();
      await storage
        .addIdColumn(db.schema.createTable('users'))
        .addColumn('username', 'text', (c) => c.notNull().unique())
        .addColumn('email', 'text', (c) => c.notNull().unique())
        .addColumn('password_hash', 'text', (c) => c.notNull())
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('default_org_id', 'integer', (c) => c.references('organizations.id').onDelete('set null'))
        .addColumn('must_reset_password', types.boolean, (c) => c.notNull())
        .addColumn('is_active', types.boolean, (c) => c.notNull())
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('organization_members')
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .addPrimaryKeyConstraint('organization_members_pk', ['org_id', 'user_id'])
        .execute();
      await db.schema.createIndex('organization_members_user').on('organization_members').column('user_id').execute();
    },
    async down({ db }) {
      await db.schema.dropTable('organization_members').execute();
      await db.schema.dropTable('users').execute();
      await db.schema.dropTable('organizations').execute();
    },
  },
  '2026-11-22T0000_governance': {
    async up({ db, storage }) {
      const { types } = storage;
      await db.schema.alterTable('users').addColumn('reset_token_hash', 'text').execute();
      await db.schema.alterTable('users').addColumn('reset_token_expires_at', types.timestamp).execute();
      await storage
        .addIdColumn(db.schema.createTable('personal_access_tokens'))
        .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('token_hash', 'text', (c) => c.notNull().unique())
        .addColumn('hash_kind', 'text', (c) => c.notNull())
        .addColumn('token_prefix', 'text', (c) => c.notNull())
        .addColumn('scopes', types.json)
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .addColumn('expires_at', types.timestamp)
        .addColumn('last_used_at', types.timestamp)
        .addColumn('revoked_at', types.timestamp)
        .addColumn('revoked_by', 'integer')
        .execute();
      await db.schema.createIndex('personal_access_tokens_user').on('personal_access_tokens').column('user_id').execute();
      await storage
        .addIdColumn(db.schema.createTable('groups'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('description', 'text')
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .addUniqueConstraint('groups_org_name', ['org_id', 'name'])
        .execute();
      await db.schema
        .createTable('group_capabilities')
        .addColumn('group_id', 'integer', (c) => c.notNull().references('groups.id').onDelete('cascade'))
        .addColumn('capability', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('group_capabilities_pk', ['group_id', 'capability'])
        .execute();
      await db.schema
        .createTable('group_members')
        .addColumn('group_id', 'integer', (c) => c.notNull().references('groups.id').onDelete('cascade'))
        .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .addPrimaryKeyConstraint('group_members_pk', ['group_id', 'user_id'])
        .execute();
      await db.schema.createIndex('group_members_user').on('group_members').column('user_id').execute();
      await storage
        .addIdColumn(db.schema.createTable('audit_log'))
        .addColumn('at', types.timestamp, (c) => c.notNull())
        .addColumn('actor_user_id', 'integer')
        .addColumn('actor_username', 'text')
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('outcome', 'text', (c) => c.notNull())
        .addColumn('target_type', 'text')
        .addColumn('target_id', 'text')
        .addColumn('org_id', 'integer')
        .addColumn('ip', 'text')
        .addColumn('request_id', 'text')
        .addColumn('details', types.json, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('audit_log_org').on('audit_log').columns(['org_id', 'id']).execute();
      await storage.guardAppendOnly(db, 'audit_log');
      await storage
        .addIdColumn(db.schema.createTable('mail_outbox'))
        .addColumn('recipient', 'text', (c) => c.notNull())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('body', 'text', (c) => c.notNull())
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .execute();
    },
    async down({ db, storage }) {
      await db.schema.dropTable('mail_outbox').execute();
      await storage.unguardAppendOnly(db, 'audit_log');
      await db.schema.dropTable('audit_log').execute();
      await db.schema.dropTable('group_members').execute();
      await db.schema.dropTable('group_capabilities').execute();
      await db.schema.dropTable('groups').execute();
      await db.schema.dropTable('personal_access_tokens').execute();
      await db.schema.alterTable('users').dropColumn('reset_token_expires_at').execute();
      await db.schema.alterTable('users').dropColumn('reset_token_hash').execute();
    },
  },
  '2026-11-22T0000_identity_change_counter': {
    async up({ db, storage }) {
      await storage.trackChanges(db, IDENTITY_COUNTER, IDENTITY_TABLES);
    },
    async down({ db, storage }) {
      await storage.untrackChanges(db, IDENTITY_COUNTER, IDENTITY_TABLES);
    },
  },
  // A password change or reset ends the user's sessions: JWTs issued before this are refused.
  '2026-11-23T0000_sessions_valid_after': {
    async up({ db, storage }) {
      await db.schema.alterTable('users').addColumn('sessions_valid_after', storage.types.timestamp).execute();
    },
    async down({ db }) {
      await db.schema.alterTable('users').dropColumn('sessions_valid_after').execute();
    },
  },
  // Background work (kernel/work): durable, leased items of work that plugins enqueue and handle.
  '2026-11-25T0100_background_work': {
    async up({ db, storage }) {
      const { types } = storage;
      await storage
        .addIdColumn(db.schema.createTable('background_work'))
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('org_id', 'integer')
        .addColumn('payload', types.json, (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('reason', 'text')
        .addColumn('error', 'text')
        .addColumn('result', types.json)
        .addColumn('progress', types.json)
        .addColumn('attempts', 'integer', (c) => c.notNull())
        .addColumn('max_attempts', 'integer', (c) => c.notNull())
        .addColumn('timeout_ms', 'integer', (c) => c.notNull())
        .addColumn('run_after', types.timestamp, (c) => c.notNull())
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', types.timestamp)
        .addColumn('cancel_requested', types.boolean, (c) => c.notNull())
        .addColumn('on_behalf_of', 'integer')
        .addColumn('on_behalf_scopes', types.json)
        .addColumn('dedupe_key', 'text', (c) => c.unique())
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .addColumn('started_at', types.timestamp)
        .addColumn('finished_at', types.timestamp)
        .execute();
      await db.schema.createIndex('background_work_due').on('background_work').columns(['status', 'run_after', 'id']).execute();
      await db.schema.createIndex('background_work_org').on('background_work').columns(['org_id', 'status']).execute();
    },
    async down({ db }) {
      await db.schema.dropTable('background_work').execute();
    },
  },
  // Durable events (kernel/events): an outbox written with the change it reports, and each subscriber's position in it.
  '2026-11-25T0200_durable_events': {
    async up({ db, storage }) {
      const { types } = storage;
      await storage
        .addIdColumn(db.schema.createTable('event_outbox'))
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('org_id', 'integer')
        .addColumn('payload', types.json, (c) => c.notNull())
        .addColumn('publisher', 'text', (c) => c.notNull())
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('event_outbox_type').on('event_outbox').columns(['type', 'id']).execute();
      await db.schema
        .createTable('event_subscriptions')
        .addColumn('subscriber', 'text', (c) => c.primaryKey())
        .addColumn('position', types.bigint, (c) => c.notNull())
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', types.timestamp)
        .addColumn('failures', 'integer', (c) => c.notNull())
        .addColumn('last_error', 'text')
        .addColumn('updated_at', types.timestamp, (c) => c.notNull())
        .execute();
    },
    async down({ db }) {
      await db.schema.dropTable('event_subscriptions').execute();
      await db.schema.dropTable('event_outbox').execute();
    },
  },
  // Per-organization plugin switches: a row is an organization's choice; without one the manifest's default_enabled holds.
  '2026-11-25T0300_plugin_organizations': {
    async up({ db, storage }) {
      await db.schema
        .createTable('plugin_organizations')
        .addColumn('plugin_id', 'text', (c) => c.notNull())
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('enabled', storage.types.boolean, (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('updated_by', 'integer', (c) => c.references('users.id').onDelete('set null'))
        .addPrimaryKeyConstraint('plugin_organizations_pk', ['plugin_id', 'org_id'])
        .execute();
      await storage.trackChanges(db, PLUGIN_ENABLEMENT_COUNTER, [{ table: 'plugin_organizations' }]);
    },
    async down({ db, storage }) {
      await storage.untrackChanges(db, PLUGIN_ENABLEMENT_COUNTER, [{ table: 'plugin_organizations' }]);
      await db.schema.dropTable('plugin_organizations').execute();
    },
  },
  // Callers that are not users (kernel/auth/principal.ts): audit rows name an API key or a background
  // run (and the user it acts for); rate-limit buckets several instances share (RATE_LIMIT_STORE=database).
  '2026-11-25T0400_callers_and_shared_rate_limits': {
    async up({ db, storage }) {
      const { types } = storage;
      await db.schema.alterTable('audit_log').addColumn('actor_kind', 'text').execute();
      await db.schema.alterTable('audit_log').addColumn('actor_api_key_id', 'text').execute();
      await db.schema.alterTable('audit_log').addColumn('actor_api_key_name', 'text').execute();
      await db.schema.alterTable('audit_log').addColumn('actor_authenticator', 'text').execute();
      await db.schema.alterTable('audit_log').addColumn('actor_run_id', 'integer').execute();
      await db.schema
        .createTable('rate_limit_buckets')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('tokens', types.double, (c) => c.notNull())
        .addColumn('granted', 'integer', (c) => c.notNull())
        .addColumn('updated_at_ms', types.double, (c) => c.notNull())
        .addColumn('full_at_ms', types.double, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('rate_limit_buckets_full_at').on('rate_limit_buckets').column('full_at_ms').execute();
    },
    async down({ db }) {
      await db.schema.dropTable('rate_limit_buckets').execute();
      for (const column of ['actor_run_id', 'actor_authenticator', 'actor_api_key_name', 'actor_api_key_id', 'actor_kind']) {
        await db.schema.alterTable('audit_log').dropColumn(column).execute();
      }
    },
  },
  // Postgres: the change counters' trigger function also notifies the listening instances as a
  // change commits (storage/postgres.ts, BUMP_CHANGE_COUNTER), so they see it at once rather than at
  // their next timed read. `trackChanges` defines that function anew wherever it runs; given no
  // table, it does nothing else here (the counter exists). On SQLite it changes nothing.
  '2026-12-02T0000_change_counter_notices': {
    async up({ db, storage }) {
      await storage.trackChanges(db, IDENTITY_COUNTER, []);
    },
    // The notices are harmless to a kernel that does not listen: nothing to undo.
    async down() {},
  },
};
