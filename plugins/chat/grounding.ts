import type { ChatMessage } from '../llm_mesh/public.ts';
import type { ChatSource } from './conversation-store.ts';
import type { GroundingPassage } from './public.ts';

/** Passages of a conversation's knowledge bases given with each message, at most. */
export const SOURCES_PER_MESSAGE = 5;

const CITE = [
  'Numbered sources from the organization\u2019s knowledge bases follow, found for the user\u2019s next message.',
  'Where you use one, cite it after the statement as [n] (for example [1] or [2][3]); cite nothing else as a source.',
  'If the message asks about what these documents say and they do not say it, answer that they do not, rather than from anything else.',
].join(' ');
const NOTHING_FOUND = 'The organization\u2019s knowledge bases hold nothing about the user\u2019s next message. If it asks about their documents, say that they do not cover it rather than answering from anything else.';

/** The sources a reply cites, numbered from 1 in the order they are given. */
export const sourcesOf = (passages: GroundingPassage[]): ChatSource[] =>
  passages.map((p, i) => ({ n: i + 1, knowledge_base_id: p.knowledge_base_id, document_id: p.document_id, document_name: p.document_name, chunk_id: p.chunk_id, excerpt: p.excerpt }));

/** What the model is told before the user's message: the passages to cite, numbered as `sources`, or that none was found. Not kept: each message is grounded anew. */
export function groundingMessage(passages: GroundingPassage[]): ChatMessage {
  if (!passages.length) return { role: 'system', content: NOTHING_FOUND };
  return { role: 'system', content: `${CITE}\n\n${passages.map((p, i) => `[${i + 1}] (${p.document_name})\n${p.text}`).join('\n\n')}` };
}
