import { definePlugin, problems } from '../../kernel/plugin-api.ts';
import { chatGrounding } from '../chat/public.ts';
import { knowledgeSearch } from '../knowledge_bases/public.ts';

/** Grounds conversations in knowledge bases: a conversation's `knowledge_base_ids`, searched for each message. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const knowledge = ctx.useService(knowledgeSearch);
    ctx.contribute(chatGrounding, {
      id: 'knowledge_bases',
      async refusals({ orgId, principal }, ids) {
        if (!principal.capabilities.has('knowledge.read')) return new Map(ids.map((id) => [id, 'reading knowledge bases needs the capability "knowledge.read"']));
        const existing = await knowledge.existing(orgId, ids);
        return new Map(ids.filter((id) => !existing.has(id)).map((id) => [id, 'no such knowledge base in this organization']));
      },
      passages(caller, ids, query, topK) {
        // Checked on every message: a user who lost the right reads no more passages through an old conversation.
        if (!caller.principal.capabilities.has('knowledge.read')) throw problems.forbidden('this conversation searches knowledge bases, which needs the capability "knowledge.read"');
        return knowledge.passages(caller, ids, query, topK);
      },
    });
  },
});
