import { definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { projectCatalog } from '../projects/public.ts';
import { CallLog } from './call-log.ts';
import { ConnectionStore } from './connection-store.ts';
import { Mesh } from './mesh.ts';
import { llmMeshMigrations } from './migrations.ts';
import { Providers } from './providers.ts';
import { llmMesh, llmProviders } from './public.ts';
import { Quotas } from './quotas.ts';
import { meshRoutes } from './routes.ts';

/**
 * The `llm_mesh` router: an organization's connections to model servers (providers are plugins),
 * and every model call through guardrails, cost quotas and rate limits, traced with its cost.
 */
export default definePlugin({
  deps: {
    storage: kernelServices.storage,
    vault: kernelServices.vault,
    outbound: kernelServices.outbound,
    rateLimits: kernelServices.rateLimits,
    audit: kernelServices.audit,
    events: kernelServices.events,
    tokens: kernelServices.tokens,
    enablement: kernelServices.pluginEnablement,
    config: kernelServices.config,
  },
  migrations: llmMeshMigrations,
  init: ({ storage, vault, outbound, rateLimits, audit, events, tokens, enablement, config }, ctx) => {
    const providers = new Providers(ctx.pluginId, enablement);
    ctx.provideExtensionPoint(llmProviders, (contribution) => providers.accept(contribution), { list: (orgId) => providers.described(orgId) });
    const connections = new ConnectionStore(storage);
    const calls = new CallLog(storage);
    const quotas = new Quotas(storage, calls, events);
    const mesh = new Mesh({ connections, providers, calls, quotas, vault, outbound, rateLimits, audit, hmac: (text) => tokens.hmac(text), idleTimeoutMs: config.LLM_IDLE_TIMEOUT_MS, rateLimitWaitMs: config.LLM_RATE_LIMIT_WAIT_MS });
    ctx.provideService(llmMesh, mesh);
    return { routes: meshRoutes({ connections, providers, mesh, calls, quotas, projects: ctx.useService(projectCatalog), vault, outbound }) };
  },
});
