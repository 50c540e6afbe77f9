import type { Migration } from '../../storage/index.ts';

/** Conversations and their messages. Frozen: never import current code here. */
export const chatMigrations: Record<string, Migration> = {
  '2026-12-02T0500_chat': {
    async up({ db, storage }) {
      await storage
        .addIdColumn(db.schema.createTable('chat_conversations'))
        .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
        // A conversation is its user's alone: every read is filtered by it.
        .addColumn('user_id', 'integer', (c) => c.notNull())
        .addColumn('title', 'text', (c) => c.notNull())
        .addColumn('connection_id', 'integer', (c) => c.notNull())
        .addColumn('model', 'text')
        .addColumn('system_prompt', 'text')
        .addColumn('tools', 'text', (c) => c.notNull())
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('chat_conversations_owner').on('chat_conversations').columns(['org_id', 'user_id']).execute();
      await storage
        .addIdColumn(db.schema.createTable('chat_messages'))
        .addColumn('conversation_id', 'integer', (c) => c.notNull().references('chat_conversations.id').onDelete('cascade'))
        .addColumn('role', 'text', (c) => c.notNull())
        .addColumn('content', 'text')
        // An assistant turn's tool calls; a tool turn's call id and tool name.
        .addColumn('tool_calls', 'text')
        .addColumn('tool_call_id', 'text')
        .addColumn('tool_name', 'text')
        .addColumn('usage', 'text')
        .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
        .execute();
      await db.schema.createIndex('chat_messages_conversation').on('chat_messages').columns(['conversation_id', 'id']).execute();
    },
    async down({ db }) {
      await db.schema.dropTable('chat_messages').execute();
      await db.schema.dropTable('chat_conversations').execute();
    },
  },
  '2026-12-03T0700_chat_grounding': {
    async up({ db }) {
      // The knowledge bases a conversation is grounded in (JSON ids), and the sources an assistant's reply cites.
      await db.schema.alterTable('chat_conversations').addColumn('knowledge_base_ids', 'text', (c) => c.notNull().defaultTo('[]')).execute();
      await db.schema.alterTable('chat_messages').addColumn('sources', 'text').execute();
    },
    async down({ db }) {
      await db.schema.alterTable('chat_messages').dropColumn('sources').execute();
      await db.schema.alterTable('chat_conversations').dropColumn('knowledge_base_ids').execute();
    },
  },
};
