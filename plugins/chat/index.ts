import { definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { agentToolRunner } from '../agent_tools/public.ts';
import { llmMesh } from '../llm_mesh/public.ts';
import { ConversationStore } from './conversation-store.ts';
import { chatMigrations } from './migrations.ts';
import { chatRoutes } from './routes.ts';

/** The `chat` router: each user's conversations with an assistant that answers through the LLM mesh and calls agent tools as the user. */
export default definePlugin({
  deps: { storage: kernelServices.storage, config: kernelServices.config },
  migrations: chatMigrations,
  init: ({ storage, config }, ctx) => ({
    routes: chatRoutes({ store: new ConversationStore(storage), mesh: ctx.useService(llmMesh), tools: ctx.useService(agentToolRunner), maxToolSteps: config.CHAT_MAX_TOOL_STEPS }),
  }),
});
