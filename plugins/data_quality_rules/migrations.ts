import type { Migration } from '../../storage/index.ts';

export const qualityMigrations: Record<string, Migration> = {
  '2026-11-22T0500_quality_rules': {
    async up({ db, storage }) {
      const { types } = storage;
      await storage
        .addIdColumn(db.schema.createTable('dq_rules'))
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('dataset_id', 'integer', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('params', types.json, (c) => c.notNull())
        .addColumn('severity', 'text', (c) => c.notNull())
        .addColumn('enabled', types.boolean, (c) => c.notNull())
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('dq_rules_dataset').on('dq_rules').columns(['org_id', 'dataset_id']).execute();
      await storage
        .addIdColumn(db.schema.createTable('dq_runs'))
        .addColumn('rule_id', 'integer', (c) => c.notNull().references('dq_rules.id').onDelete('cascade'))
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('dataset_id', 'integer', (c) => c.notNull())
        .addColumn('dataset_version', 'integer', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('severity', 'text', (c) => c.notNull())
        .addColumn('failing_rows', types.bigint, (c) => c.notNull())
        .addColumn('observed', types.double)
        .addColumn('message', 'text', (c) => c.notNull())
        .addColumn('sample', types.json, (c) => c.notNull())
        .addColumn('started_at', types.timestamp, (c) => c.notNull())
        .addColumn('duration_ms', types.double, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('dq_runs_rule').on('dq_runs').columns(['rule_id', 'id']).execute();
    },
    async down({ db }) {
      await db.schema.dropTable('dq_runs').execute();
      await db.schema.dropTable('dq_rules').execute();
    },
  },
  // The data scope a run was evaluated in (finding F3): the runner's row-policy scope key and whether
  // the runner saw PII. NULL for runs kept before: their scope is unknown.
  '2026-11-25T0000_quality_run_scope': {
    async up({ db, storage }) {
      await db.schema.alterTable('dq_runs').addColumn('scope_key', 'text').execute();
      await db.schema.alterTable('dq_runs').addColumn('saw_pii', storage.types.boolean).execute();
    },
    async down({ db }) {
      await db.schema.alterTable('dq_runs').dropColumn('saw_pii').execute();
      await db.schema.alterTable('dq_runs').dropColumn('scope_key').execute();
    },
  },
};
