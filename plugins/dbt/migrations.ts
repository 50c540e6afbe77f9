import type { Migration } from '../../storage/index.ts';

export const dbtMigrations: Record<string, Migration> = {
  '2026-11-27T1700_dbt_imports': {
    async up({ db, storage }) {
      const { types } = storage;
      await storage
        .addIdColumn(db.schema.createTable('dbt_imports'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('project_id', 'integer', (c) => c.notNull())
        .addColumn('schema_version', 'integer', (c) => c.notNull())
        .addColumn('dbt_version', 'text')
        .addColumn('dbt_project', 'text')
        .addColumn('summary', types.json, (c) => c.notNull())
        .addColumn('created_by', 'integer')
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('dbt_imports_project').on('dbt_imports').columns(['org_id', 'project_id', 'id']).execute();
      // What each dbt resource became here, so a re-import updates instead of duplicating.
      await db.schema
        .createTable('dbt_objects')
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('project_id', 'integer', (c) => c.notNull())
        .addColumn('unique_id', 'text', (c) => c.notNull())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('ref_id', 'integer', (c) => c.notNull())
        .addColumn('import_id', 'integer', (c) => c.notNull())
        .addPrimaryKeyConstraint('dbt_objects_pk', ['org_id', 'project_id', 'unique_id', 'kind'])
        .execute();
      // One import of a project at a time (its names and objects are decided from what the last one left).
      await db.schema
        .createTable('dbt_running')
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('project_id', 'integer', (c) => c.notNull())
        .addColumn('started_at', types.timestamp, (c) => c.notNull())
        .addPrimaryKeyConstraint('dbt_running_pk', ['org_id', 'project_id'])
        .execute();
    },
    async down({ db }) {
      await db.schema.dropTable('dbt_running').execute();
      await db.schema.dropTable('dbt_objects').execute();
      await db.schema.dropTable('dbt_imports').execute();
    },
  },
};
