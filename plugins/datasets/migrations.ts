import { sql } from 'kysely';
import type { Migration } from '../../storage/index.ts';

/** The datasets plugin's catalog table; dataset contents live in tables of their own. */
/** Bumped by the database with every change of row policies (plugins/datasets/row-policies.ts). */
export const ROW_POLICIES_COUNTER = 'row_policies';
/** Bumped by any change of the datasets table: the catalog's `get` serves from memory while it stays. */
export const DATASETS_COUNTER = 'datasets';

export const datasetMigrations: Record<string, Migration> = {
  '2026-11-22T0200_datasets': {
    async up({ db, storage }) {
      const { types } = storage;
      await storage
        .addIdColumn(db.schema.createTable('datasets'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('project_id', 'integer', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('description', 'text')
        .addColumn('columns', types.json, (c) => c.notNull())
        .addColumn('row_count', types.bigint, (c) => c.notNull())
        .addColumn('version', 'integer', (c) => c.notNull())
        .addColumn('table_name', 'text', (c) => c.notNull())
        .addColumn('created_by', 'integer')
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', types.timestamp, (c) => c.notNull())
        .addUniqueConstraint('datasets_org_name', ['org_id', 'name'])
        .execute();
      await db.schema.createIndex('datasets_project').on('datasets').column('project_id').execute();
    },
    async down({ db }) {
      await db.schema.dropTable('datasets').execute();
    },
  },
  '2026-11-22T0300_contracts': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('dataset_contracts'))
        .addColumn('dataset_id', 'integer', (c) => c.notNull().references('datasets.id').onDelete('cascade'))
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('version', 'integer', (c) => c.notNull())
        .addColumn('columns', storage.types.json, (c) => c.notNull())
        .addColumn('is_current', storage.types.boolean, (c) => c.notNull())
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addUniqueConstraint('dataset_contracts_version', ['dataset_id', 'version'])
        .execute();
      // Exactly one current contract per dataset, enforced by the database.
      await db.schema.createIndex('dataset_contracts_one_current').on('dataset_contracts').column('dataset_id').unique().where(sql<boolean>`is_current`).execute();
    },
    async down({ db }) {
      await db.schema.dropTable('dataset_contracts').execute();
    },
  },
  '2026-11-22T0600_row_policies': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('row_policies'))
        .addColumn('dataset_id', 'integer', (c) => c.notNull().references('datasets.id').onDelete('cascade'))
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('group_id', 'integer', (c) => c.notNull().references('groups.id').onDelete('cascade'))
        .addColumn('filters', storage.types.json, (c) => c.notNull())
        .addColumn('description', 'text')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('row_policies_dataset').on('row_policies').column('dataset_id').execute();
    },
    async down({ db }) {
      await db.schema.dropTable('row_policies').execute();
    },
  },
  '2026-11-22T0700_row_policies_change_counter': {
    async up({ db, storage }) {
      await storage.trackChanges(db, ROW_POLICIES_COUNTER, [{ table: 'row_policies' }]);
    },
    async down({ db, storage }) {
      await storage.untrackChanges(db, ROW_POLICIES_COUNTER, [{ table: 'row_policies' }]);
    },
  },
  '2026-11-28T0000_datasets_change_counter': {
    async up({ db, storage }) {
      await storage.trackChanges(db, DATASETS_COUNTER, [{ table: 'datasets' }]);
    },
    async down({ db, storage }) {
      await storage.untrackChanges(db, DATASETS_COUNTER, [{ table: 'datasets' }]);
    },
  },
};
