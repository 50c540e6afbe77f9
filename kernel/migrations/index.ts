import type { Migration } from '../../storage/index.ts';

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
};
