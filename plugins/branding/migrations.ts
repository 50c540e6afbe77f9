import type { Migration } from '../../storage/index.ts';

/** One row per organization that changed its branding. Frozen: never import current code here. */
export const brandingMigrations: Record<string, Migration> = {
  '2026-12-01T2200_branding': {
    async up({ db, storage }) {
      await db.schema
        .createTable('branding')
        .addColumn('org_id', 'integer', (c) => c.primaryKey().references('organizations.id').onDelete('cascade'))
        .addColumn('display_name', 'text')
        .addColumn('primary_color', 'text')
        .addColumn('accent_color', 'text')
        .addColumn('email_footer', 'text')
        // The logo as base64 text (at most 512 KB of image): both adapters hold it alike, read whole.
        .addColumn('logo_type', 'text')
        .addColumn('logo_base64', 'text')
        .addColumn('logo_sha256', 'text')
        .addColumn('logo_updated_at', storage.types.timestamp)
        .addColumn('updated_by', 'integer')
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .execute();
    },
    async down({ db }) {
      await db.schema.dropTable('branding').execute();
    },
  },
};
