/**
 * The chat's public contract: the extension point that grounds a conversation in documents. A
 * conversation's `knowledge_base_ids` are served by the contribution `knowledge_bases` (the plugin
 * `chat_knowledge`), so the chat never learns the knowledge bases' plugin, and where that plugin is
 * disabled for an organization a conversation there cannot name bases.
 */
import { defineExtensionPoint, z, type Principal } from '../../kernel/plugin-api.ts';

/** A passage found for a message: what the assistant is given to cite, and the reply's `sources` are made of. */
export interface GroundingPassage {
  knowledge_base_id: number;
  document_id: number;
  document_name: string;
  chunk_id: number;
  /** The passage, as the model reads it. */
  text: string;
  /** Its start, as the reply cites it. */
  excerpt: string;
}

export interface ChatGrounding {
  /** Which list of a conversation it serves: `knowledge_bases` serves `knowledge_base_ids`. */
  id: string;
  /** Why the caller may not ground a conversation in each of `ids` they may not (not there, not readable): by id. */
  refusals(context: { orgId: number; principal: Principal }, ids: readonly number[]): Promise<Map<number, string>>;
  /** The passages of `ids` answering `query`, best first, at most `topK`; none when nothing relevant is found. */
  passages(context: { orgId: number; principal: Principal; requestId?: string }, ids: readonly number[], query: string, topK: number): Promise<GroundingPassage[]>;
}

export const chatGrounding = defineExtensionPoint<ChatGrounding>({
  id: 'chat.grounding',
  key: (grounding) => grounding.id,
  schema: z
    .object({
      id: z.literal('knowledge_bases'),
      refusals: z.custom<ChatGrounding['refusals']>((value) => typeof value === 'function', 'must be a function'),
      passages: z.custom<ChatGrounding['passages']>((value) => typeof value === 'function', 'must be a function'),
    })
    .strict(),
});
