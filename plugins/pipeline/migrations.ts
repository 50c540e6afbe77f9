import { sql } from 'kysely';
import type { Migration } from '../../storage/index.ts';

/**
 * The pipeline's tables: recipes and the datasets they read and write, runs and their log lines.
 * A dataset is the output of at most one recipe: a unique index says so, whoever writes.
 */
export const pipelineMigrations: Record<string, Migration> = {
  '2026-11-25T1000_pipeline_recipes': {
    async up({ db, storage }) {
      const { types } = storage;
      await storage
        .addIdColumn(db.schema.createTable('pipeline_recipes'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('project_id', 'integer', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('params', types.json, (c) => c.notNull())
        .addColumn('created_by', 'integer')
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', types.timestamp, (c) => c.notNull())
        .addUniqueConstraint('pipeline_recipes_name', ['org_id', 'project_id', 'name'])
        .execute();
      await storage
        .addIdColumn(db.schema.createTable('pipeline_recipe_datasets'))
        .addColumn('recipe_id', 'integer', (c) => c.notNull().references('pipeline_recipes.id').onDelete('cascade'))
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('dataset_id', 'integer', (c) => c.notNull())
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('position', 'integer', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('pipeline_recipe_datasets_recipe').on('pipeline_recipe_datasets').columns(['recipe_id', 'role', 'position']).execute();
      await db.schema.createIndex('pipeline_recipe_datasets_dataset').on('pipeline_recipe_datasets').columns(['org_id', 'dataset_id']).execute();
      await db.schema.createIndex('pipeline_one_producer').on('pipeline_recipe_datasets').column('dataset_id').unique().where(sql.ref('role'), '=', 'output').execute();
    },
    async down({ db }) {
      await db.schema.dropTable('pipeline_recipe_datasets').execute();
      await db.schema.dropTable('pipeline_recipes').execute();
    },
  },
  '2026-11-25T1010_pipeline_runs': {
    async up({ db, storage }) {
      const { types } = storage;
      await storage
        .addIdColumn(db.schema.createTable('pipeline_runs'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('trigger', 'text', (c) => c.notNull())
        .addColumn('project_id', 'integer', (c) => c.notNull())
        .addColumn('recipe_id', 'integer')
        .addColumn('job_id', 'integer')
        .addColumn('parent_run_id', 'integer')
        .addColumn('work_id', 'integer')
        .addColumn('targets', types.json)
        .addColumn('mode', 'text')
        .addColumn('input_versions', types.json)
        .addColumn('waits_for', types.json)
        .addColumn('created_by', 'integer')
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .addColumn('started_at', types.timestamp)
        .addColumn('ended_at', types.timestamp)
        .addColumn('rows_written', types.bigint)
        .addColumn('error', types.json)
        .execute();
      await db.schema.createIndex('pipeline_runs_listing').on('pipeline_runs').columns(['org_id', 'id']).execute();
      await db.schema.createIndex('pipeline_runs_parent').on('pipeline_runs').column('parent_run_id').execute();
      await db.schema.createIndex('pipeline_runs_recipe').on('pipeline_runs').columns(['recipe_id', 'status']).execute();
      await storage
        .addIdColumn(db.schema.createTable('pipeline_run_logs'))
        .addColumn('run_id', 'integer', (c) => c.notNull().references('pipeline_runs.id').onDelete('cascade'))
        .addColumn('ts', types.timestamp, (c) => c.notNull())
        .addColumn('level', 'text', (c) => c.notNull())
        .addColumn('message', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('pipeline_run_logs_run').on('pipeline_run_logs').columns(['run_id', 'id']).execute();
    },
    async down({ db }) {
      await db.schema.dropTable('pipeline_run_logs').execute();
      await db.schema.dropTable('pipeline_runs').execute();
    },
  },
  '2026-11-27T1000_pipeline_run_schedule': {
    async up({ db }) {
      // The schedule whose fire started the run (the scheduler plugin's id; null otherwise).
      await db.schema.alterTable('pipeline_runs').addColumn('schedule_id', 'integer').execute();
      await db.schema.createIndex('pipeline_runs_schedule').on('pipeline_runs').columns(['org_id', 'schedule_id']).execute();
    },
    async down({ db }) {
      await db.schema.dropIndex('pipeline_runs_schedule').execute();
      await db.schema.alterTable('pipeline_runs').dropColumn('schedule_id').execute();
    },
  },
  '2026-11-27T1100_pipeline_scenarios': {
    async up({ db, storage }) {
      const { types } = storage;
      await storage
        .addIdColumn(db.schema.createTable('pipeline_scenarios'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('project_id', 'integer', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('steps', types.json, (c) => c.notNull())
        .addColumn('triggers', types.json, (c) => c.notNull())
        .addColumn('reporters', types.json, (c) => c.notNull())
        // The user a triggered run acts for: whoever last saved the scenario.
        .addColumn('run_as', 'integer', (c) => c.notNull())
        // …narrowed to the scopes of the token they saved it with (null: their full permissions).
        .addColumn('run_as_scopes', types.json)
        // Numbers each dataset_changed debounce window (the dedupe key of its trigger work).
        .addColumn('trigger_seq', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created_by', 'integer')
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', types.timestamp, (c) => c.notNull())
        .addUniqueConstraint('pipeline_scenarios_name', ['org_id', 'project_id', 'name'])
        .execute();
      // A scenario run's steps, copied from the scenario when the run starts, each with its outcome.
      await storage
        .addIdColumn(db.schema.createTable('pipeline_scenario_steps'))
        .addColumn('run_id', 'integer', (c) => c.notNull().references('pipeline_runs.id').onDelete('cascade'))
        .addColumn('position', 'integer', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('params', types.json, (c) => c.notNull())
        .addColumn('continue_on_failure', types.boolean, (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        // The newest child run of the scenario run when the step began: its own children come after.
        .addColumn('children_after', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('started_at', types.timestamp)
        .addColumn('ended_at', types.timestamp)
        .addColumn('output', types.json)
        .addColumn('error', 'text')
        .addUniqueConstraint('pipeline_scenario_steps_position', ['run_id', 'position'])
        .execute();
      await db.schema.alterTable('pipeline_runs').addColumn('scenario_id', 'integer').execute();
      await db.schema.createIndex('pipeline_runs_scenario').on('pipeline_runs').columns(['org_id', 'scenario_id']).execute();
    },
    async down({ db }) {
      await db.schema.dropIndex('pipeline_runs_scenario').execute();
      await db.schema.alterTable('pipeline_runs').dropColumn('scenario_id').execute();
      await db.schema.dropTable('pipeline_scenario_steps').execute();
      await db.schema.dropTable('pipeline_scenarios').execute();
    },
  },
  '2026-11-28T1000_pipeline_run_idempotency': {
    async up({ db }) {
      // What another plugin names a run by so that it starts once however often it asks (a
      // schedule's fire retried after its instance died). Nulls never collide: unkeyed runs are free.
      await db.schema.alterTable('pipeline_runs').addColumn('idempotency_key', 'text').execute();
      await db.schema.createIndex('pipeline_runs_idempotency').on('pipeline_runs').columns(['org_id', 'idempotency_key']).unique().execute();
    },
    async down({ db }) {
      await db.schema.dropIndex('pipeline_runs_idempotency').execute();
      await db.schema.alterTable('pipeline_runs').dropColumn('idempotency_key').execute();
    },
  },
  '2026-12-03T0800_pipeline_run_progress': {
    async up({ db }) {
      // How far a run that reports it has come: items done of the total (a contributed kind's).
      await db.schema.alterTable('pipeline_runs').addColumn('progress_done', 'integer').execute();
      await db.schema.alterTable('pipeline_runs').addColumn('progress_total', 'integer').execute();
    },
    async down({ db }) {
      await db.schema.alterTable('pipeline_runs').dropColumn('progress_total').execute();
      await db.schema.alterTable('pipeline_runs').dropColumn('progress_done').execute();
    },
  },
};
