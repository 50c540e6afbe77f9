import type { Migration } from '../../storage/index.ts';

/** The projects plugin's tables. Frozen in time: later changes are new migrations. */
export const projectMigrations: Record<string, Migration> = {
  '2026-11-22T0100_projects': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('projects'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('description', 'text')
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .addUniqueConstraint('projects_org_key', ['org_id', 'key'])
        .execute();
    },
    async down({ db }) {
      await db.schema.dropTable('projects').execute();
    },
  },
};
