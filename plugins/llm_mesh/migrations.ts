import type { Migration } from '../../storage/index.ts';

/** The change counter of the mesh's settings (connections, quotas). */
export const LLM_MESH_COUNTER = 'llm_mesh';

/** LLM connections, the trace of every call, and cost quotas. Frozen: never import current code here. */
export const llmMeshMigrations: Record<string, Migration> = {
  '2026-12-02T0400_llm_mesh': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('llm_mesh_connections'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('provider', 'text', (c) => c.notNull())
        // base_url, models, default_model, prices, options: JSON; never the API key.
        .addColumn('config', 'text', (c) => c.notNull())
        // The API key, sealed by the kernel's vault: never answered, never logged.
        .addColumn('api_key_sealed', 'text')
        .addColumn('guardrails', 'text', (c) => c.notNull())
        .addColumn('rate_limits', 'text', (c) => c.notNull())
        .addColumn('log_prompts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .addUniqueConstraint('llm_mesh_connections_org_name', ['org_id', 'name'])
        .execute();
      await storage
        .addIdColumn(db.schema.createTable('llm_mesh_calls'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        // Kept when the connection is deleted: spending stays counted against quotas and in usage.
        .addColumn('connection_id', 'integer')
        .addColumn('user_id', 'integer')
        .addColumn('project_id', 'integer')
        .addColumn('request_id', 'text')
        .addColumn('operation', 'text', (c) => c.notNull())
        .addColumn('model', 'text', (c) => c.notNull())
        .addColumn('streamed', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('error', 'text')
        .addColumn('latency_ms', 'integer', (c) => c.notNull())
        .addColumn('input_tokens', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('output_tokens', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('cost_usd', 'double precision', (c) => c.notNull().defaultTo(0))
        .addColumn('guardrails', 'text', (c) => c.notNull())
        // Only when the connection's log_prompts is on.
        .addColumn('prompt', 'text')
        .addColumn('answer', 'text')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('llm_mesh_calls_org_time').on('llm_mesh_calls').columns(['org_id', 'created_at']).execute();
      await storage
        .addIdColumn(db.schema.createTable('llm_mesh_quotas'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('scope', 'text', (c) => c.notNull())
        .addColumn('scope_id', 'integer')
        .addColumn('amount_usd', 'double precision', (c) => c.notNull())
        .addColumn('period', 'text', (c) => c.notNull())
        .addColumn('days', 'integer')
        .addColumn('blocking', 'integer', (c) => c.notNull())
        .addColumn('alert_at', 'text', (c) => c.notNull())
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .execute();
      // One alert per quota, period and threshold: the row's insert is what decides it is sent once.
      await db.schema
        .createTable('llm_mesh_quota_alerts')
        .addColumn('quota_id', 'integer', (c) => c.notNull().references('llm_mesh_quotas.id').onDelete('cascade'))
        .addColumn('period_start', 'text', (c) => c.notNull())
        .addColumn('threshold', 'double precision', (c) => c.notNull())
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addPrimaryKeyConstraint('llm_mesh_quota_alerts_pk', ['quota_id', 'period_start', 'threshold'])
        .execute();
    },
    async down({ db }) {
      await db.schema.dropTable('llm_mesh_quota_alerts').execute();
      await db.schema.dropTable('llm_mesh_quotas').execute();
      await db.schema.dropTable('llm_mesh_calls').execute();
      await db.schema.dropTable('llm_mesh_connections').execute();
    },
  },
  '2026-12-03T0900_llm_mesh_change_counter': {
    // Connections and quotas as calls read them are kept in memory until this counter moves (the
    // calls' own trace is not tracked: it changes with every call).
    async up({ db, storage }) {
      await storage.trackChanges(db, LLM_MESH_COUNTER, [{ table: 'llm_mesh_connections' }, { table: 'llm_mesh_quotas' }]);
    },
    async down({ db, storage }) {
      await storage.untrackChanges(db, LLM_MESH_COUNTER, [{ table: 'llm_mesh_connections' }, { table: 'llm_mesh_quotas' }]);
    },
  },
};
