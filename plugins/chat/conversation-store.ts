import { problems } from '../../kernel/plugin-api.ts';
import type { ChatMessage, TokenUsage, ToolCall } from '../llm_mesh/public.ts';
import type { Storage } from '../../storage/index.ts';

export interface Conversation {
  id: number;
  title: string;
  connection_id: number;
  model: string | null;
  system_prompt: string | null;
  tools: string[];
  knowledge_base_ids: number[];
  created_at: string;
  updated_at: string;
}

/** A stored turn: what the model was told or said, and for a tool turn which tool answered. */
export interface StoredMessage {
  id: number;
  role: ChatMessage['role'];
  content: string | null;
  tool_calls: ToolCall[] | null;
  tool_call_id: string | null;
  tool_name: string | null;
  usage: TokenUsage | null;
  /** The sources an assistant's reply was given to cite (a conversation with knowledge bases). */
  sources: ChatSource[] | null;
  created_at: string;
}

/** A source a reply cites as [n]: a passage of a knowledge base, by its start. */
export interface ChatSource {
  n: number;
  knowledge_base_id: number;
  document_id: number;
  document_name: string;
  chunk_id: number;
  excerpt: string;
}

/** Whose conversations: one user's, in one organization. */
export interface Owner {
  orgId: number;
  userId: number;
}

const conversationOf = (row: Record<string, any>): Conversation => ({
  id: Number(row.id),
  title: row.title,
  connection_id: Number(row.connection_id),
  model: row.model,
  system_prompt: row.system_prompt,
  tools: JSON.parse(row.tools),
  knowledge_base_ids: JSON.parse(row.knowledge_base_ids),
  created_at: row.created_at,
  updated_at: row.updated_at,
});

const messageOf = (row: Record<string, any>): StoredMessage => ({
  id: Number(row.id),
  role: row.role,
  content: row.content,
  tool_calls: row.tool_calls === null ? null : JSON.parse(row.tool_calls),
  tool_call_id: row.tool_call_id,
  tool_name: row.tool_name,
  usage: row.usage === null ? null : JSON.parse(row.usage),
  sources: row.sources === null ? null : JSON.parse(row.sources),
  created_at: row.created_at,
});

/** Conversations and their messages, each read and written for its owner only. */
export class ConversationStore {
  constructor(private readonly storage: Storage) {}

  async create(owner: Owner, input: Omit<Conversation, 'id' | 'created_at' | 'updated_at'>): Promise<Conversation> {
    const now = this.storage.now();
    const row = await this.storage.db
      .insertInto('chat_conversations')
      .values({ org_id: owner.orgId, user_id: owner.userId, ...input, tools: JSON.stringify(input.tools), knowledge_base_ids: JSON.stringify(input.knowledge_base_ids), created_at: now, updated_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
    return conversationOf(row);
  }

  async list(owner: Owner): Promise<Conversation[]> {
    const rows = await this.storage.db.selectFrom('chat_conversations').selectAll().where('org_id', '=', owner.orgId).where('user_id', '=', owner.userId).orderBy('updated_at', 'desc').orderBy('id', 'desc').execute();
    return rows.map(conversationOf);
  }

  /** The owner's conversation; anyone else's is not there (404). */
  async get(owner: Owner, id: number): Promise<Conversation> {
    const row = await this.storage.db.selectFrom('chat_conversations').selectAll().where('org_id', '=', owner.orgId).where('user_id', '=', owner.userId).where('id', '=', id).executeTakeFirst();
    if (!row) throw problems.notFound(`no conversation ${id} of yours in this organization`);
    return conversationOf(row);
  }

  async remove(owner: Owner, id: number): Promise<void> {
    const deleted = await this.storage.db.deleteFrom('chat_conversations').where('org_id', '=', owner.orgId).where('user_id', '=', owner.userId).where('id', '=', id).executeTakeFirst();
    if (Number(deleted.numDeletedRows) === 0) throw problems.notFound(`no conversation ${id} of yours in this organization`);
  }

  async messages(conversationId: number): Promise<StoredMessage[]> {
    return (await this.storage.db.selectFrom('chat_messages').selectAll().where('conversation_id', '=', conversationId).orderBy('id').execute()).map(messageOf);
  }

  /** Adds turns of one exchange together, and marks the conversation as just used. */
  async append(conversationId: number, turns: (Omit<StoredMessage, 'id' | 'created_at'>)[]): Promise<void> {
    const now = this.storage.now();
    await this.storage.transaction(async (trx) => {
      for (const turn of turns) {
        await trx
          .insertInto('chat_messages')
          .values({
            conversation_id: conversationId,
            role: turn.role,
            content: turn.content,
            tool_calls: turn.tool_calls === null ? null : JSON.stringify(turn.tool_calls),
            tool_call_id: turn.tool_call_id,
            tool_name: turn.tool_name,
            usage: turn.usage === null ? null : JSON.stringify(turn.usage),
            sources: turn.sources === null ? null : JSON.stringify(turn.sources),
            created_at: now,
          })
          .execute();
      }
      await trx.updateTable('chat_conversations').set({ updated_at: now }).where('id', '=', conversationId).execute();
    });
  }
}
