import type { Migration } from '../../storage/index.ts';

export const registryMigrations: Record<string, Migration> = {
  '2026-11-28T1200_registry': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('registry_models'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('project_id', 'integer', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('task', 'text', (c) => c.notNull())
        .addColumn('active_version', 'integer')
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .addUniqueConstraint('registry_models_name', ['org_id', 'project_id', 'name'])
        .execute();
      await storage
        .addIdColumn(db.schema.createTable('registry_model_versions'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('model_id', 'integer', (c) => c.notNull().references('registry_models.id').onDelete('cascade'))
        .addColumn('version', 'integer', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('algorithm', 'text', (c) => c.notNull())
        .addColumn('dataset_id', 'integer', (c) => c.notNull())
        .addColumn('target', 'text', (c) => c.notNull())
        // What training was asked: features (with types), params, test_ratio, seed.
        .addColumn('spec', storage.types.json, (c) => c.notNull())
        .addColumn('run_id', 'integer')
        .addColumn('metrics', storage.types.json)
        .addColumn('feature_importance', storage.types.json)
        .addColumn('training_rows', 'integer')
        .addColumn('test_rows', 'integer')
        .addColumn('dataset_version', 'integer')
        .addColumn('trained_at', storage.types.timestamp)
        .addColumn('error', 'text')
        // The trained model (the library's toJSON with the encodings), as JSON text: read whole, never queried.
        .addColumn('artifact', 'text')
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addUniqueConstraint('registry_model_versions_number', ['model_id', 'version'])
        .execute();
    },
    async down({ db }) {
      await db.schema.dropTable('registry_model_versions').execute();
      await db.schema.dropTable('registry_models').execute();
    },
  },
};
