import { definePlugin, kernelServices, OfferedContributions } from '../../kernel/plugin-api.ts';
import { agentToolRunner } from '../agent_tools/public.ts';
import { llmMesh } from '../llm_mesh/public.ts';
import { ConversationStore } from './conversation-store.ts';
import { chatMigrations } from './migrations.ts';
import { chatGrounding, type ChatGrounding } from './public.ts';
import { chatRoutes } from './routes.ts';

/** The `chat` router: each user's conversations with an assistant that answers through the LLM mesh, calls agent tools as the user, and cites what grounds it (`chat.grounding`). */
export default definePlugin({
  deps: { storage: kernelServices.storage, config: kernelServices.config, enablement: kernelServices.pluginEnablement },
  migrations: chatMigrations,
  init: ({ storage, config, enablement }, ctx) => {
    const groundings = new OfferedContributions<{ id: string; pluginId: string; grounding: ChatGrounding }>(ctx.pluginId, enablement);
    ctx.provideExtensionPoint(chatGrounding, ({ value, pluginId }) => groundings.add({ id: value.id, pluginId, grounding: value }));
    return {
      routes: chatRoutes({
        store: new ConversationStore(storage),
        mesh: ctx.useService(llmMesh),
        tools: ctx.useService(agentToolRunner),
        maxToolSteps: config.CHAT_MAX_TOOL_STEPS,
        groundingIn: async (orgId) => (await groundings.get(orgId, 'knowledge_bases'))?.grounding,
      }),
    };
  },
});
