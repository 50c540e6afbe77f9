import type { LlmMesh, MeshCaller } from '../llm_mesh/public.ts';
import type { KnowledgeBase } from './kb-store.ts';
import type { KnowledgeSearchHit } from './public.ts';
import { excerpt } from './retrieval.ts';
import type { Searcher } from './search.ts';

export interface Source {
  n: number;
  document_id: number;
  document_name: string;
  chunk_id: number;
  excerpt: string;
}

export interface Answer {
  answer: string;
  sources: Source[];
  /** Whether the model was asked: not when nothing relevant was found. */
  grounded: boolean;
  cost_usd: number;
}

/** What `ask` answers when retrieval finds nothing relevant: said plainly, no model asked. */
export const NOTHING_FOUND = 'I could not find anything about this in the knowledge base, so I cannot answer it from its documents.';

const INSTRUCTIONS = [
  'You answer questions using only the numbered sources given with the question.',
  'After each statement, cite the sources it comes from as [n] (for example [1] or [2][3]).',
  'If the sources do not contain the answer, say that they do not, and do not answer from anything else.',
].join(' ');

/**
 * Retrieval-augmented answer: the best passages (hybrid search when the base has embeddings, else
 * keyword) are numbered and given to the model with the question; its answer cites them as [n],
 * each marker pointing into `sources`. When nothing relevant is found the model is not asked.
 */
export async function ask(mesh: LlmMesh, searcher: Searcher, caller: MeshCaller, base: KnowledgeBase, question: { text: string; connection_id: number; model?: string; top_k: number }): Promise<Answer> {
  const { items, relevant } = await searcher.search(caller, base, question.text, question.top_k, base.embedding ? 'hybrid' : 'keyword');
  if (!relevant || !items.length) return { answer: NOTHING_FOUND, sources: [], grounded: false, cost_usd: 0 };
  const sources = items.map((hit: KnowledgeSearchHit, i) => ({ n: i + 1, document_id: hit.document_id, document_name: hit.document_name, chunk_id: hit.chunk_id, excerpt: excerpt(hit.text), text: hit.text }));
  const context = sources.map((s) => `[${s.n}] (${s.document_name})\n${s.text}`).join('\n\n');
  const completion = await mesh.complete(caller, {
    connection_id: question.connection_id,
    model: question.model,
    temperature: 0,
    messages: [
      { role: 'system', content: INSTRUCTIONS },
      { role: 'user', content: `Sources:\n\n${context}\n\nQuestion: ${question.text}` },
    ],
  });
  return { answer: completion.message.content ?? '', sources: sources.map(({ text: _text, ...source }) => source), grounded: true, cost_usd: completion.cost_usd };
}
