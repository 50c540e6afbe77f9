import type { Migration } from '../../storage/index.ts';

/** Knowledge bases, the documents they hold, and their passages (full-text indexed). Frozen: never import current code here. */
export const knowledgeBasesMigrations: Record<string, Migration> = {
  '2026-12-02T0610_knowledge_bases': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('knowledge_bases'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        .addColumn('project_id', 'integer', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        // {connection_id, model} of the embeddings, or null: keyword search only.
        .addColumn('embedding', 'text')
        .addColumn('chunk_size', 'integer', (c) => c.notNull())
        .addColumn('chunk_overlap', 'integer', (c) => c.notNull())
        .addColumn('created_by', 'integer')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('knowledge_bases_documents')
        .addColumn('kb_id', 'integer', (c) => c.notNull().references('knowledge_bases.id').onDelete('cascade'))
        .addColumn('document_id', 'integer', (c) => c.notNull())
        .addColumn('document_name', 'text', (c) => c.notNull())
        // pending until an indexing run has cut and embedded it; failed with its error.
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('error', 'text')
        .addColumn('chunks', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('added_at', storage.types.timestamp, (c) => c.notNull())
        .addPrimaryKeyConstraint('knowledge_bases_documents_pk', ['kb_id', 'document_id'])
        .execute();
      await storage
        .addIdColumn(db.schema.createTable('knowledge_bases_chunks'))
        .addColumn('kb_id', 'integer', (c) => c.notNull().references('knowledge_bases.id').onDelete('cascade'))
        .addColumn('document_id', 'integer', (c) => c.notNull())
        .addColumn('position', 'integer', (c) => c.notNull())
        .addColumn('text', 'text', (c) => c.notNull())
        // The passage's vector as JSON, when the base has embeddings.
        .addColumn('embedding', 'text')
        .execute();
      await db.schema.createIndex('knowledge_bases_chunks_document').on('knowledge_bases_chunks').columns(['kb_id', 'document_id']).execute();
      await storage.fullText.create(db, 'knowledge_bases_chunks', 'text');
    },
    async down({ db, storage }) {
      await storage.fullText.drop(db, 'knowledge_bases_chunks', 'text');
      await db.schema.dropTable('knowledge_bases_chunks').execute();
      await db.schema.dropTable('knowledge_bases_documents').execute();
      await db.schema.dropTable('knowledge_bases').execute();
    },
  },
};
