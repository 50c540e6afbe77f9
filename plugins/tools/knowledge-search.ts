import { definePlugin } from '../../kernel/plugin-api.ts';
import { agentTool, agentTools } from '../agent_tools/public.ts';
import { knowledgeSearch } from '../knowledge_bases/public.ts';

interface Args {
  knowledge_base_id: number;
  query: string;
  top_k?: number;
}

/** `knowledge_search`: the passages of a knowledge base that best answer a query, with their documents (to cite). */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const knowledge = ctx.useService(knowledgeSearch);
    ctx.contribute(
      agentTools,
      agentTool<Args>({
        name: 'knowledge_search',
        description: 'Search a knowledge base of the organization\u2019s documents: answers the passages that best match the query, each with its document\u2019s name and id, to quote and cite.',
        capability: 'knowledge.read',
        parameters: {
          type: 'object',
          properties: {
            knowledge_base_id: { type: 'integer', minimum: 1 },
            query: { type: 'string', minLength: 1, maxLength: 10_000 },
            top_k: { type: 'integer', minimum: 1, maximum: 20, default: 5 },
          },
          required: ['knowledge_base_id', 'query'],
          additionalProperties: false,
        },
        run: async (args, { orgId, principal }) => ({ items: await knowledge.search(orgId, principal, args.knowledge_base_id, args.query, args.top_k ?? 5) }),
      }),
    );
  },
});
