/** The knowledge plugin's public contract: documents as other plugins read them, and the event of one deleted. */
import { pluginServiceRef } from '../../kernel/plugin-api.ts';

export interface KnowledgeDocument {
  id: number;
  name: string;
  mime_type: string;
  text: string;
}

export interface KnowledgeDocuments {
  /** The organization's document with its extracted text, or null. */
  get(orgId: number, id: number): Promise<KnowledgeDocument | null>;
}

export const knowledgeDocuments = pluginServiceRef<KnowledgeDocuments>('knowledge.documents');

/** Published in the transaction that deletes a document: knowledge bases drop its chunks. */
export const KNOWLEDGE_DOCUMENT_DELETED = 'knowledge.document.deleted';
export interface KnowledgeDocumentDeletedEvent {
  document_id: number;
}
