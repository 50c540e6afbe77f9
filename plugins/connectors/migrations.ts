import type { Migration } from '../../storage/index.ts';

export const connectorMigrations: Record<string, Migration> = {
  '2026-11-22T0800_connectors': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('connectors'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('config', storage.types.json, (c) => c.notNull())
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .addUniqueConstraint('connectors_org_name', ['org_id', 'name'])
        .execute();
    },
    async down({ db }) {
      await db.schema.dropTable('connectors').execute();
    },
  },
};
