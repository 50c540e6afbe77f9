import { sql } from 'kysely';
import type { Migration } from '../../storage/index.ts';

/**
 * Schedules, and their fire history. A schedule points at its one pending fire (a kernel work
 * item): only that item may fire it and arm the next, and a fire time is recorded at most once.
 */
export const schedulerMigrations: Record<string, Migration> = {
  '2026-11-27T1600_scheduler': {
    async up({ db, storage }) {
      const { types } = storage;
      await storage
        .addIdColumn(db.schema.createTable('scheduler_schedules'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('project_id', 'integer', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('target_field', 'text', (c) => c.notNull())
        .addColumn('target_id', 'integer', (c) => c.notNull())
        .addColumn('cron', 'text', (c) => c.notNull())
        .addColumn('timezone', 'text', (c) => c.notNull())
        .addColumn('enabled', 'boolean', (c) => c.notNull())
        .addColumn('catch_up', 'text', (c) => c.notNull())
        .addColumn('next_run_at', types.timestamp)
        .addColumn('disabled_reason', 'text')
        .addColumn('generation', 'integer', (c) => c.notNull())
        .addColumn('pending_work_id', 'integer')
        .addColumn('owner_id', 'integer', (c) => c.notNull())
        .addColumn('owner_scopes', types.json)
        .addColumn('created_at', types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', types.timestamp, (c) => c.notNull())
        .addUniqueConstraint('scheduler_schedules_name', ['org_id', 'project_id', 'name'])
        .execute();
      await db.schema.createIndex('scheduler_schedules_due').on('scheduler_schedules').columns(['enabled', 'next_run_at']).execute();
      await storage
        .addIdColumn(db.schema.createTable('scheduler_fires'))
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('schedule_id', 'integer', (c) => c.notNull().references('scheduler_schedules.id').onDelete('cascade'))
        .addColumn('fire_at', types.timestamp, (c) => c.notNull())
        .addColumn('started_at', types.timestamp, (c) => c.notNull())
        .addColumn('outcome', 'text', (c) => c.notNull())
        .addColumn('run_id', 'integer')
        .addColumn('error', 'text')
        // Each (schedule, time) fires once, whichever instance runs it: a second record fails.
        .addUniqueConstraint('scheduler_fires_once', ['schedule_id', 'fire_at'])
        .execute();
    },
    async down({ db }) {
      await db.schema.dropTable('scheduler_fires').execute();
      await db.schema.dropTable('scheduler_schedules').execute();
    },
  },
  '2026-11-28T1000_scheduler_fire_work': {
    async up({ db }) {
      // The work item finishing a fire: only it (a retry of it, after its instance died) may
      // finish the fire. Null on fires recorded before.
      await db.schema.alterTable('scheduler_fires').addColumn('work_id', 'integer').execute();
      // Fires still firing, for the sweep that finishes those left so: a few rows, however long the history.
      await db.schema.createIndex('scheduler_fires_firing').on('scheduler_fires').column('started_at').where(sql.ref('outcome'), '=', 'firing').execute();
    },
    async down({ db }) {
      await db.schema.dropIndex('scheduler_fires_firing').execute();
      await db.schema.alterTable('scheduler_fires').dropColumn('work_id').execute();
    },
  },
};
