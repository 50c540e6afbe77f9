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

/** A passage found in one of several bases, with that base and the excerpt a source cites. */
export interface KnowledgePassage extends KnowledgeSearchHit {
  knowledge_base_id: number;
  excerpt: string;
}

export interface KnowledgeSearch {
  /** The best passages of the organization's base for `query`, as POST /api/knowledge-bases/{id}/search answers them (its default mode); 404 for a base of no such id. */
  search(orgId: number, principal: Principal, kbId: number, query: string, topK: number): Promise<KnowledgeSearchHit[]>;
  /** Those of `kbIds` that are bases of the organization. */
  existing(orgId: number, kbIds: readonly number[]): Promise<Set<number>>;
  /**
   * The passages of the organization's bases among `kbIds` that answer `query`, best first, at most
   * `topK`: each base searched as `ask` searches it, those finding nothing relevant left out, the
   * rest fused by reciprocal rank. None when nothing relevant is found.
   */
  passages(caller: { orgId: number; principal: Principal; requestId?: string }, kbIds: readonly number[], query: string, topK: number): Promise<KnowledgePassage[]>;
}

export const knowledgeSearch = pluginServiceRef<KnowledgeSearch>('knowledge_bases.search');
