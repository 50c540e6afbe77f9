/** The knowledge bases' public contract: search as other plugins (an agent tool) call it. */
import { pluginServiceRef, type Principal } from '../../kernel/plugin-api.ts';

export interface KnowledgeSearchHit {
  chunk_id: number;
  document_id: number;
  document_name: string;
  text: string;
  score: number;
  position: number;
}

export interface KnowledgeSearch {
  /** The best passages of the organization's base for `query`, as POST /api/knowledge-bases/{id}/search answers them (its default mode); 404 for a base of no such id. */
  search(orgId: number, principal: Principal, kbId: number, query: string, topK: number): Promise<KnowledgeSearchHit[]>;
}

export const knowledgeSearch = pluginServiceRef<KnowledgeSearch>('knowledge_bases.search');
