import type { Migration } from '../../storage/index.ts';

/** Uploaded documents and their extracted text. Frozen: never import current code here. */
export const knowledgeMigrations: Record<string, Migration> = {
  '2026-12-02T0600_knowledge': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('knowledge_documents'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('mime_type', 'text', (c) => c.notNull())
        .addColumn('size', 'integer', (c) => c.notNull())
        .addColumn('sha256', 'text', (c) => c.notNull())
        .addColumn('chars', 'integer', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('text', 'text', (c) => c.notNull())
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('knowledge_documents_org').on('knowledge_documents').columns(['org_id', 'id']).execute();
    },
    async down({ db }) {
      await db.schema.dropTable('knowledge_documents').execute();
    },
  },
};
