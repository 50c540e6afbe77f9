import { problems } from '../../kernel/plugin-api.ts';
import type { LlmMesh, MeshCaller } from '../llm_mesh/public.ts';
import type { KnowledgeBase, KnowledgeBaseStore } from './kb-store.ts';
import type { KnowledgeSearchHit } from './public.ts';
import { cosine, reciprocalRankFusion } from './retrieval.ts';

export type SearchMode = 'keyword' | 'vector' | 'hybrid';

/**
 * Below this cosine similarity a passage found by its vector alone is not taken as relevant (an
 * answer is then not grounded in it): what keeps `ask` from answering from the nearest unrelated text.
 */
export const MIN_VECTOR_SIMILARITY = 0.3;

/** The knowledge bases whose passages' vectors one instance keeps in memory, the most recently searched. */
const VECTOR_CACHE_BASES = 32;

/** How many candidates each ranking of a hybrid search gives the fusion, per result asked. */
const CANDIDATES_PER_RESULT = 4;

/** Search of a knowledge base: keyword (the database's full-text engine), vector (the mesh's embeddings, cosine), or both fused by reciprocal rank. */
export class Searcher {
  /** Per base: its passages' vectors as of its last change (a base that changed is read again); least recently used first. */
  private readonly vectorCache = new Map<number, { updatedAt: string; vectors: { id: number; embedding: number[] }[] }>();

  constructor(
    private readonly store: KnowledgeBaseStore,
    private readonly mesh: LlmMesh,
  ) {}

  /** The best passages for `query`, with `relevant` telling whether any was found by its words or close enough in meaning. */
  async search(caller: MeshCaller, base: KnowledgeBase, query: string, topK: number, mode: SearchMode): Promise<{ items: KnowledgeSearchHit[]; relevant: boolean }> {
    if (mode !== 'keyword' && !base.embedding) throw problems.badRequest(`knowledge base ${base.id} has no embeddings: search it with mode "keyword"`, [{ path: 'body.mode', message: 'needs embeddings' }]);
    if (mode === 'keyword') {
      const hits = await this.store.keyword(caller.orgId, base.id, query, topK);
      return { items: await this.hits(base.id, hits), relevant: hits.length > 0 };
    }
    const vector = await this.vectorRanking(caller, base, query, mode === 'vector' ? topK : topK * CANDIDATES_PER_RESULT);
    const closeEnough = vector.some((v) => v.score >= MIN_VECTOR_SIMILARITY);
    if (mode === 'vector') return { items: await this.hits(base.id, vector), relevant: closeEnough };
    const keyword = await this.store.keyword(caller.orgId, base.id, query, topK * CANDIDATES_PER_RESULT);
    const fused = reciprocalRankFusion([keyword.map((k) => k.id), vector.map((v) => v.id)]).slice(0, topK);
    return { items: await this.hits(base.id, fused), relevant: keyword.length > 0 || closeEnough };
  }

  /** The base's passages nearest the query's vector, best first. */
  private async vectorRanking(caller: MeshCaller, base: KnowledgeBase, query: string, limit: number): Promise<{ id: number; score: number }[]> {
    const setting = base.embedding!;
    const [queryVector] = (await this.mesh.embed(caller, { connection_id: setting.connection_id, model: setting.model, input: [query] })).vectors;
    const vectors = await this.vectorsOf(caller.orgId, base);
    return vectors
      .map((v) => ({ id: v.id, score: cosine(queryVector, v.embedding) }))
      .sort((a, b) => b.score - a.score || a.id - b.id)
      .slice(0, limit);
  }

  private async vectorsOf(orgId: number, base: KnowledgeBase) {
    const cached = this.vectorCache.get(base.id);
    if (cached && cached.updatedAt === base.updated_at) {
      // Moved to the end: the map's order is the order of last use.
      this.vectorCache.delete(base.id);
      this.vectorCache.set(base.id, cached);
      return cached.vectors;
    }
    const vectors = await this.store.vectors(orgId, base.id);
    this.vectorCache.delete(base.id);
    this.vectorCache.set(base.id, { updatedAt: base.updated_at, vectors });
    // The least recently searched bases' vectors go first: memory follows the bases in use.
    for (const id of this.vectorCache.keys()) {
      if (this.vectorCache.size <= VECTOR_CACHE_BASES) break;
      this.vectorCache.delete(id);
    }
    return vectors;
  }

  private async hits(kbId: number, ranked: { id: number; score: number }[]): Promise<KnowledgeSearchHit[]> {
    const chunks = await this.store.chunks(kbId, ranked.map((r) => r.id));
    const scores = new Map(ranked.map((r) => [r.id, r.score]));
    return chunks.map((c) => ({ chunk_id: c.id, document_id: c.document_id, document_name: c.document_name, text: c.text, score: Math.round(scores.get(c.id)! * 1e6) / 1e6, position: c.position }));
  }
}
