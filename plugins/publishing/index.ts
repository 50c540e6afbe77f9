import { apiKeyAuthenticators, definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { datasetCatalog } from '../datasets/public.ts';
import { lineageConsumers } from '../lineage/public.ts';
import { projectCatalog, projectDeleteGuards } from '../projects/public.ts';
import { registryModels } from '../registry/public.ts';
import { governedSql } from '../sql/public.ts';
import { AnswerCache } from './answer-cache.ts';
import { assetRoutes } from './asset-routes.ts';
import { apiServiceAssets, PublishedAssets } from './assets.ts';
import { endpointCalls, endpointRunner } from './calls.ts';
import { dryRunRoutes } from './dry-run-route.ts';
import { apiServiceConsumers } from './endpoint-lineage.ts';
import { DATA_KEY_PREFIX, KeyStore } from './key-store.ts';
import { keepLookupsIndexed } from './lookup-indexes.ts';
import { publishingMigrations } from './migrations.ts';
import { apiServiceCalls, dataApiKeys, publishedAssets } from './public.ts';
import { apiServiceRoutes } from './routes.ts';
import { serviceDocuments } from './service-openapi.ts';
import { userCalls } from './user-calls.ts';
import { ServiceStore } from './service-store.ts';
import { UsageRecorder } from './usage.ts';
import { usageRoutes } from './usage-routes.ts';
import { UsageStore } from './usage-store.ts';

/**
 * The `publishing` router: API Services (spec §2.5, §3.4) and their data API keys (§5.14). The
 * service path itself is the `api_service` router's, which calls `apiServiceCalls`.
 */
export default definePlugin({
  deps: { storage: kernelServices.storage, tokens: kernelServices.tokens, delegation: kernelServices.delegation, rateLimits: kernelServices.rateLimits, enablement: kernelServices.pluginEnablement, events: kernelServices.events, config: kernelServices.config, logger: kernelServices.logger },
  migrations: publishingMigrations,
  init: ({ storage, tokens, delegation, rateLimits, enablement, events, config, logger }, ctx) => {
    const catalog = ctx.useService(datasetCatalog);
    const services = new ServiceStore(storage, events);
    // Kept as PATs are: a keyed HMAC under the kernel's PAT_HASH_KEY (the dpk_ prefix keeps the two apart).
    const keys = new KeyStore(storage, (secret) => tokens.hmac(secret));
    const sql = ctx.useService(governedSql);
    const models = ctx.useService(registryModels);
    keepLookupsIndexed(events, services, catalog);
    // A project's API Services (published or not) go first: a deleted project leaves none serving.
    ctx.contribute(projectDeleteGuards, async (orgId, projectId) => {
      const count = await services.countInProject(orgId, projectId);
      return count ? `it holds ${count} API Service${count === 1 ? '' : 's'}; delete them first` : null;
    });
    // Published assets of every type, API Services' own among them; dashboards and others contribute theirs.
    const assets = new PublishedAssets(enablement);
    assets.add(ctx.pluginId, apiServiceAssets(services));
    ctx.provideService(dataApiKeys, {
      expiringBetween: async (from, to) => (await keys.expiringBetween(from, to)).map((k) => ({ id: k.id, org_id: k.org_id, service_id: k.service_id, name: k.name, expires_at: k.expires_at, minted_by: k.minted_by })),
    });
    ctx.provideExtensionPoint(publishedAssets, ({ value, pluginId }) => assets.add(pluginId, value));
    ctx.contribute(lineageConsumers, apiServiceConsumers({ services, keys, sql }));
    ctx.contribute(apiKeyAuthenticators, { id: 'publishing', prefix: DATA_KEY_PREFIX, authenticate: (key) => keys.authenticate(key) });
    const run = endpointRunner({ catalog, sql, models, sqlTimeoutMs: config.API_SERVICE_SQL_TIMEOUT_MS });
    const usage = new UsageStore(storage);
    const recorder = new UsageRecorder(usage, config.API_USAGE_FLUSH_MS, logger, config.API_USAGE_RETENTION_DAYS);
    ctx.onDispose(() => recorder.stop());
    ctx.provideService(apiServiceCalls, {
      call: recorder.counted(endpointCalls({ services, keys, delegation, rateLimits, run, answers: new AnswerCache({ catalog, sql }) })),
      openapi: serviceDocuments({ services, keys, delegation, catalog, sql, models }),
      callAsUser: userCalls({ services, catalog, sql, models, run }),
    });
    return { routes: [...apiServiceRoutes({ services, keys, catalog, projects: ctx.useService(projectCatalog), sql, models }), ...usageRoutes({ services, usage }), ...dryRunRoutes({ services, run }), ...assetRoutes(assets)] };
  },
});
