import type { Migration } from '../../storage/index.ts';

/** Dashboards and their cards. Frozen: never import current code here. */
export const dashboardsMigrations: Record<string, Migration> = {
  '2026-12-02T0100_dashboards': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('dashboards'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('project_id', 'integer', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('description', 'text')
        // [{column, label}]: query parameters of a card's data that narrow every card whose dataset has the column.
        .addColumn('filters', storage.types.json, (c) => c.notNull())
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('dashboards_org_project').on('dashboards').columns(['org_id', 'project_id']).execute();
      await storage
        .addIdColumn(db.schema.createTable('dashboards_cards'))
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('dashboard_id', 'integer', (c) => c.notNull().references('dashboards.id').onDelete('cascade'))
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('title', 'text')
        // {x, y, w, h} on the dashboard's grid.
        .addColumn('layout', storage.types.json, (c) => c.notNull())
        .addColumn('config', storage.types.json, (c) => c.notNull())
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('dashboards_cards_dashboard').on('dashboards_cards').columns(['dashboard_id']).execute();
    },
    async down({ db }) {
      await db.schema.dropTable('dashboards_cards').execute();
      await db.schema.dropTable('dashboards').execute();
    },
  },
  '2026-12-02T0200_dashboards_links': {
    async up({ db, storage }) {
      // Share links of published dashboards. The link's token is signed (the platform's keyed HMAC
      // over the id and nonce): only the nonce is kept, never the token itself. A link shows the
      // dashboard as it was published (`snapshot`: its name, filters and cards), read with the
      // publisher's rights narrowed to their token's scopes (`published_scopes`, null: none).
      await storage
        .addIdColumn(db.schema.createTable('dashboards_links'))
        .addColumn('org_id', 'integer', (c) => c.notNull())
        .addColumn('dashboard_id', 'integer', (c) => c.notNull().references('dashboards.id').onDelete('cascade'))
        .addColumn('nonce', 'text', (c) => c.notNull())
        // Whose view of the data the page shows (their rights of now, PII always masked).
        .addColumn('published_by', 'integer', (c) => c.notNull())
        .addColumn('published_scopes', storage.types.json)
        .addColumn('snapshot', storage.types.json, (c) => c.notNull())
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('expires_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('revoked_at', storage.types.timestamp)
        .addColumn('revoked_by', 'integer')
        .execute();
      await db.schema.createIndex('dashboards_links_dashboard').on('dashboards_links').columns(['dashboard_id']).execute();
    },
    async down({ db }) {
      await db.schema.dropTable('dashboards_links').execute();
    },
  },
};
