import { sql } from 'kysely';
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
  '2026-11-28T1800_registry_imported_without_dataset': {
    // dataset_id becomes nullable (null: an imported version, which read no dataset; it stored 0).
    // SQLite cannot drop a NOT NULL in place: a nullable column replaces it, on both databases
    // (add, copy, drop, rename: one change per statement, which SQLite asks).
    async up({ db }) {
      await db.schema.alterTable('registry_model_versions').addColumn('trained_on', 'integer').execute();
      await sql`update registry_model_versions set trained_on = case when algorithm = 'onnx' then null else dataset_id end`.execute(db);
      await db.schema.alterTable('registry_model_versions').dropColumn('dataset_id').execute();
      await db.schema.alterTable('registry_model_versions').renameColumn('trained_on', 'dataset_id').execute();
    },
    async down({ db }) {
      await db.schema.alterTable('registry_model_versions').addColumn('trained_on', 'integer', (c) => c.notNull().defaultTo(0)).execute();
      await sql`update registry_model_versions set trained_on = coalesce(dataset_id, 0)`.execute(db);
      await db.schema.alterTable('registry_model_versions').dropColumn('dataset_id').execute();
      await db.schema.alterTable('registry_model_versions').renameColumn('trained_on', 'dataset_id').execute();
    },
  },
  '2026-11-28T1900_registry_artifacts_apart': {
    // The models (megabytes of JSON for a forest) in a table of their own: SQLite walks a row's
    // overflow pages to reach the columns stored after a large value, so every read of a version
    // (each prediction's) read its whole model too.
    async up({ db }) {
      await db.schema
        .createTable('registry_model_artifacts')
        .addColumn('version_id', 'integer', (c) => c.primaryKey().references('registry_model_versions.id').onDelete('cascade'))
        .addColumn('artifact', 'text', (c) => c.notNull())
        .execute();
      await sql`insert into registry_model_artifacts (version_id, artifact) select id, artifact from registry_model_versions where artifact is not null`.execute(db);
      await db.schema.alterTable('registry_model_versions').dropColumn('artifact').execute();
    },
    async down({ db }) {
      await db.schema.alterTable('registry_model_versions').addColumn('artifact', 'text').execute();
      await sql`update registry_model_versions set artifact = (select a.artifact from registry_model_artifacts a where a.version_id = registry_model_versions.id)`.execute(db);
      await db.schema.dropTable('registry_model_artifacts').execute();
    },
  },
};
