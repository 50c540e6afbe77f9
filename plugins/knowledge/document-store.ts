import { beforeIdCursor, problems, type DomainEvents } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import { KNOWLEDGE_DOCUMENT_DELETED, type KnowledgeDocument, type KnowledgeDocumentDeletedEvent } from './public.ts';

/** A document as listed: everything but its text. */
export interface DocumentInfo {
  id: number;
  name: string;
  mime_type: string;
  size: number;
  sha256: string;
  chars: number;
  status: 'ready';
  created_by: number | null;
  created_at: string;
}

const INFO_COLUMNS = ['id', 'name', 'mime_type', 'size', 'sha256', 'chars', 'status', 'created_by', 'created_at'] as const;
const infoOf = (row: Record<string, any>): DocumentInfo => ({ ...(row as DocumentInfo), id: Number(row.id), size: Number(row.size), chars: Number(row.chars), created_by: row.created_by === null ? null : Number(row.created_by) });
const notFound = (id: number) => problems.notFound(`no document ${id} in this organization`);

/** An organization's documents: every read and write filtered by its id. */
export class DocumentStore {
  constructor(
    private readonly storage: Storage,
    private readonly events: DomainEvents,
  ) {}

  async create(orgId: number, input: { name: string; mime_type: string; size: number; sha256: string; text: string }, userId: number | null): Promise<DocumentInfo> {
    const row = await this.storage.db
      .insertInto('knowledge_documents')
      .values({ org_id: orgId, ...input, chars: input.text.length, status: 'ready', created_by: userId, created_at: this.storage.now() })
      .returning([...INFO_COLUMNS])
      .executeTakeFirstOrThrow();
    return infoOf(row);
  }

  async list(orgId: number, query: { limit: number; cursor?: string }) {
    let select = this.storage.db.selectFrom('knowledge_documents').select([...INFO_COLUMNS]).where('org_id', '=', orgId);
    if (query.cursor !== undefined) select = select.where('id', '<', beforeIdCursor.decode(query.cursor));
    const rows = (await select.orderBy('id', 'desc').limit(query.limit + 1).execute()).map(infoOf);
    const items = rows.slice(0, query.limit);
    return { items, next_cursor: rows.length > query.limit ? beforeIdCursor.encode(items[items.length - 1].id) : null };
  }

  async get(orgId: number, id: number): Promise<DocumentInfo & { text: string }> {
    const row = await this.storage.db.selectFrom('knowledge_documents').select([...INFO_COLUMNS, 'text']).where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (!row) throw notFound(id);
    return { ...infoOf(row), text: row.text };
  }

  async find(orgId: number, id: number): Promise<KnowledgeDocument | null> {
    const row = await this.storage.db.selectFrom('knowledge_documents').select(['id', 'name', 'mime_type', 'text']).where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    return row ? { id: Number(row.id), name: row.name, mime_type: row.mime_type, text: row.text } : null;
  }

  /** Deletes the document; the event telling knowledge bases to drop its chunks is published with it. */
  async remove(orgId: number, id: number): Promise<void> {
    await this.storage.transaction(async (trx) => {
      const deleted = await trx.deleteFrom('knowledge_documents').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
      if (Number(deleted.numDeletedRows) === 0) throw notFound(id);
      const payload: KnowledgeDocumentDeletedEvent = { document_id: id };
      await this.events.publish({ type: KNOWLEDGE_DOCUMENT_DELETED, orgId, payload }, trx);
    });
  }
}
