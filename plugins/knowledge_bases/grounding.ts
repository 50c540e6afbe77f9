import type { MeshCaller } from '../llm_mesh/public.ts';
import type { KnowledgeBaseStore } from './kb-store.ts';
import type { KnowledgePassage, KnowledgeSearchHit } from './public.ts';
import { excerpt, reciprocalRankFusion } from './retrieval.ts';
import type { Searcher, SearchMode } from './search.ts';

type Found = KnowledgeSearchHit & { knowledge_base_id: number };

/**
 * The passages of several knowledge bases that answer `query` (a chat message to ground): each base
 * of the organization among `kbIds` searched as `ask` searches it (hybrid with embeddings, else
 * keyword), a base that found nothing relevant left out. Bases searched the same way rank on one
 * scale (the engine's text ranking, cosine, or fused ranks), so their passages are merged by score;
 * bases searched differently are fused by reciprocal rank, as their scores do not compare. Best
 * first, at most `topK`. A base deleted since it was named is passed over.
 */
export async function passagesFor(store: KnowledgeBaseStore, searcher: Searcher, caller: Omit<MeshCaller, 'projectId'>, kbIds: readonly number[], query: string, topK: number): Promise<KnowledgePassage[]> {
  const bases = (await store.list(caller.orgId)).filter((base) => kbIds.includes(base.id));
  const rankings: Found[][] = [];
  const modes = new Set<SearchMode>();
  for (const base of bases) {
    const mode = base.embedding ? 'hybrid' : 'keyword';
    const { items, relevant } = await searcher.search({ ...caller, projectId: base.project_id }, base, query, topK, mode);
    if (!relevant) continue;
    modes.add(mode);
    rankings.push(items.map((hit) => ({ ...hit, knowledge_base_id: base.id })));
  }
  return merged(rankings, modes.size <= 1, topK).map((hit) => ({ ...hit, excerpt: excerpt(hit.text) }));
}

function merged(rankings: Found[][], sameScale: boolean, topK: number): Found[] {
  if (sameScale) return rankings.flat().sort((a, b) => b.score - a.score || a.chunk_id - b.chunk_id).slice(0, topK);
  const byId = new Map(rankings.flat().map((hit) => [hit.chunk_id, hit]));
  return reciprocalRankFusion(rankings.map((ranking) => ranking.map((hit) => hit.chunk_id)))
    .slice(0, topK)
    .map(({ id }) => byId.get(id)!);
}
