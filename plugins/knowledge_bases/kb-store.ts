import { problems } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { Chunk } from './chunking.ts';

export interface EmbeddingSetting {
  connection_id: number;
  model: string;
}

export interface KnowledgeBase {
  id: number;
  project_id: number;
  name: string;
  embedding: EmbeddingSetting | null;
  chunking: { size: number; overlap: number };
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

export interface BaseDocument {
  document_id: number;
  document_name: string;
  status: 'pending' | 'indexed' | 'failed';
  error: string | null;
  chunks: number;
  added_at: string;
}

/** A passage as search answers it. */
export interface StoredChunk {
  id: number;
  document_id: number;
  document_name: string;
  position: number;
  text: string;
}

const baseOf = (row: Record<string, any>): KnowledgeBase => ({
  id: Number(row.id),
  project_id: Number(row.project_id),
  name: row.name,
  embedding: row.embedding === null ? null : JSON.parse(row.embedding),
  chunking: { size: Number(row.chunk_size), overlap: Number(row.chunk_overlap) },
  created_by: row.created_by === null ? null : Number(row.created_by),
  created_at: row.created_at,
  updated_at: row.updated_at,
});

const documentOf = (row: Record<string, any>): BaseDocument => ({ document_id: Number(row.document_id), document_name: row.document_name, status: row.status, error: row.error, chunks: Number(row.chunks), added_at: row.added_at });

const notFound = (id: number) => problems.notFound(`no knowledge base ${id} in this organization`);

/** Knowledge bases, their documents and passages; a base is read by its organization only, its rows through it. */
export class KnowledgeBaseStore {
  constructor(private readonly storage: Storage) {}

  async create(orgId: number, input: { project_id: number; name: string; embedding: EmbeddingSetting | null; chunking: { size: number; overlap: number } }, userId: number | null): Promise<KnowledgeBase> {
    const now = this.storage.now();
    const row = await this.storage.db
      .insertInto('knowledge_bases')
      .values({ org_id: orgId, project_id: input.project_id, name: input.name, embedding: input.embedding && JSON.stringify(input.embedding), chunk_size: input.chunking.size, chunk_overlap: input.chunking.overlap, created_by: userId, created_at: now, updated_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
    return baseOf(row);
  }

  async list(orgId: number): Promise<KnowledgeBase[]> {
    return (await this.storage.db.selectFrom('knowledge_bases').selectAll().where('org_id', '=', orgId).orderBy('id').execute()).map(baseOf);
  }

  async get(orgId: number, id: number): Promise<KnowledgeBase> {
    const row = await this.storage.db.selectFrom('knowledge_bases').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (!row) throw notFound(id);
    return baseOf(row);
  }

  async remove(orgId: number, id: number): Promise<void> {
    const deleted = await this.storage.db.deleteFrom('knowledge_bases').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (Number(deleted.numDeletedRows) === 0) throw notFound(id);
  }

  async documents(kbId: number): Promise<BaseDocument[]> {
    return (await this.storage.db.selectFrom('knowledge_bases_documents').selectAll().where('kb_id', '=', kbId).orderBy('document_id').execute()).map(documentOf);
  }

  /** Adds documents (or marks those already in for indexing again): pending until an indexing run. */
  async addDocuments(kbId: number, documents: { id: number; name: string }[]): Promise<void> {
    const now = this.storage.now();
    await this.storage.transaction(async (trx) => {
      for (const document of documents) {
        await trx
          .insertInto('knowledge_bases_documents')
          .values({ kb_id: kbId, document_id: document.id, document_name: document.name, status: 'pending', error: null, chunks: 0, added_at: now })
          .onConflict((oc) => oc.columns(['kb_id', 'document_id']).doUpdateSet({ status: 'pending', error: null, document_name: document.name }))
          .execute();
      }
      await trx.updateTable('knowledge_bases').set({ updated_at: now }).where('id', '=', kbId).execute();
    });
  }

  /** Takes a document out of a base, with its passages; false when it was not in it. */
  async removeDocument(kbId: number, documentId: number): Promise<boolean> {
    return this.storage.transaction(async (trx) => {
      await trx.deleteFrom('knowledge_bases_chunks').where('kb_id', '=', kbId).where('document_id', '=', documentId).execute();
      const deleted = await trx.deleteFrom('knowledge_bases_documents').where('kb_id', '=', kbId).where('document_id', '=', documentId).executeTakeFirst();
      await trx.updateTable('knowledge_bases').set({ updated_at: this.storage.now() }).where('id', '=', kbId).execute();
      return Number(deleted.numDeletedRows) > 0;
    });
  }

  /** A document deleted from the organization: out of every base of it, with its passages, in one transaction. */
  async forgetDocument(orgId: number, documentId: number): Promise<void> {
    await this.storage.transaction(async (trx) => {
      const holding = (
        await trx
          .selectFrom('knowledge_bases_documents as d')
          .innerJoin('knowledge_bases as b', 'b.id', 'd.kb_id')
          .select('d.kb_id')
          .where('b.org_id', '=', orgId)
          .where('d.document_id', '=', documentId)
          .execute()
      ).map((row: { kb_id: number }) => Number(row.kb_id));
      if (!holding.length) return;
      await trx.deleteFrom('knowledge_bases_chunks').where('document_id', '=', documentId).where('kb_id', 'in', holding).execute();
      await trx.deleteFrom('knowledge_bases_documents').where('document_id', '=', documentId).where('kb_id', 'in', holding).execute();
      await trx.updateTable('knowledge_bases').set({ updated_at: this.storage.now() }).where('id', 'in', holding).execute();
    });
  }

  async pending(kbId: number): Promise<BaseDocument[]> {
    return (await this.documents(kbId)).filter((d) => d.status === 'pending');
  }

  /** Replaces a document's passages with new ones, in one transaction: a search sees the old or the new, never half. */
  async replaceChunks(kbId: number, documentId: number, chunks: (Chunk & { embedding: number[] | null })[]): Promise<void> {
    await this.storage.transaction(async (trx) => {
      await trx.deleteFrom('knowledge_bases_chunks').where('kb_id', '=', kbId).where('document_id', '=', documentId).execute();
      for (let i = 0; i < chunks.length; i += 200) {
        const rows = chunks.slice(i, i + 200).map((c) => ({ kb_id: kbId, document_id: documentId, position: c.position, text: c.text, embedding: c.embedding && JSON.stringify(c.embedding) }));
        await trx.insertInto('knowledge_bases_chunks').values(rows).execute();
      }
      const now = this.storage.now();
      await trx.updateTable('knowledge_bases_documents').set({ status: 'indexed', error: null, chunks: chunks.length }).where('kb_id', '=', kbId).where('document_id', '=', documentId).execute();
      await trx.updateTable('knowledge_bases').set({ updated_at: now }).where('id', '=', kbId).execute();
    });
  }

  async failDocument(kbId: number, documentId: number, error: string): Promise<void> {
    await this.storage.db.updateTable('knowledge_bases_documents').set({ status: 'failed', error: error.slice(0, 1000) }).where('kb_id', '=', kbId).where('document_id', '=', documentId).execute();
  }

  /** Passages by id, with their document's name, in the order asked. */
  async chunks(kbId: number, ids: number[]): Promise<StoredChunk[]> {
    if (!ids.length) return [];
    const rows = await this.storage.db
      .selectFrom('knowledge_bases_chunks as c')
      .innerJoin('knowledge_bases_documents as d', (join) => join.onRef('d.kb_id', '=', 'c.kb_id').onRef('d.document_id', '=', 'c.document_id'))
      .select(['c.id', 'c.document_id', 'd.document_name', 'c.position', 'c.text'])
      .where('c.kb_id', '=', kbId)
      .where('c.id', 'in', ids)
      .execute();
    const byId = new Map(rows.map((r: Record<string, any>) => [Number(r.id), { id: Number(r.id), document_id: Number(r.document_id), document_name: r.document_name, position: Number(r.position), text: r.text }]));
    return ids.flatMap((id) => byId.get(id) ?? []);
  }

  /** Every passage's vector of a base (for vector search), read as a long read (on SQLite, off the event loop). */
  async vectors(orgId: number, kbId: number): Promise<{ id: number; embedding: number[] }[]> {
    const rows = await this.storage.longReads(orgId).selectFrom('knowledge_bases_chunks').select(['id', 'embedding']).where('kb_id', '=', kbId).where('embedding', 'is not', null).execute();
    return rows.map((r: Record<string, any>) => ({ id: Number(r.id), embedding: JSON.parse(r.embedding) }));
  }

  /** Passages matching the query's words, best first (the database's full-text engine, as a long read). */
  keyword(orgId: number, kbId: number, query: string, limit: number) {
    return this.storage.fullText.search(this.storage.longReads(orgId), 'knowledge_bases_chunks', 'text', query, { where: { kb_id: kbId }, limit });
  }
}
