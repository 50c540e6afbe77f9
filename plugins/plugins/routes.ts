import { z } from 'zod';
import { defineRoute, problems, type PluginRegistryService } from '../../kernel/plugin-api.ts';
import { recipeTypes } from '../pipeline/public.ts';
import { pluginIdParams, pluginStatusSchema, recipeTypeSchema } from './schemas.ts';

export function pluginRoutes(registry: PluginRegistryService) {
  return [
    defineRoute({
      method: 'get',
      path: '',
      summary: 'List plugins with their state (loaded, failed with the reason, or disabled)',
      description:
        'Every plugin the manifests declare: loaded (with its version and routes\' prefix), failed with the reason and its code, or disabled in its manifest. Platform view, for operators.',
      security: 'bearer',
      capability: 'plugins.read',
      responses: { 200: { description: 'Every plugin the manifests declare', schema: z.array(pluginStatusSchema) } },
      handler: () => registry.list(),
    }),
    defineRoute({
      method: 'get',
      path: '/recipe-types',
      summary: 'Recipe types contributed by loaded plugins, with their parameter schemas',
      description: 'In the current organization (X-Org-Id, else your default one), only those of plugins enabled there.',
      security: 'bearer',
      capability: 'plugins.read',
      responses: { 200: { description: 'Recipe types', schema: z.array(recipeTypeSchema) } },
      // The pipeline plugin owns recipe types and lists them; the registry only relays by point id
      // (an empty list while no pipeline is loaded).
      handler: async ({ orgId }) => (await registry.contributions(recipeTypes.id, orgId)) as z.infer<typeof recipeTypeSchema>[],
    }),
    defineRoute({
      method: 'get',
      path: '/{id}',
      summary: 'One plugin and its state',
      description:
        'A plugin\'s manifest data and state, including the last reload error when the newest reload failed and the previous version kept serving. An unknown id is a 404.',
      security: 'bearer',
      capability: 'plugins.read',
      request: { params: pluginIdParams },
      responses: { 200: { description: 'The plugin', schema: pluginStatusSchema } },
      handler: ({ params }) => {
        const status = registry.get(params.id);
        if (!status) throw problems.notFound(`no plugin with id "${params.id}"`);
        return status;
      },
    }),
    defineRoute({
      method: 'post',
      path: '/{id}/reload',
      summary: 'Reload a plugin (and the plugins depending on it) from its manifest, without a restart',
      description:
        'Requests in flight finish on the version that took them. The new version is imported and checked before its migrations run; on a reload only additive migrations apply (new tables, new columns that are nullable or have a default, new indexes), in one transaction: any other change is rolled back and refused with code KRN_ERR_PLUGIN_MIGRATION_NOT_ADDITIVE, to be applied by a restart. If the new version fails, the previous one keeps serving and the answer is 422 with the reason and its code.',
      security: 'bearer',
      capability: 'plugins.manage',
      request: { params: pluginIdParams },
      responses: {
        200: { description: 'The plugin after the reload', schema: pluginStatusSchema },
        404: { description: 'No plugin with this id in the manifests' },
        422: { description: 'The new version failed to load; the previous one keeps serving. `code` names the reason (e.g. KRN_ERR_PLUGIN_MIGRATION_NOT_ADDITIVE)' },
      },
      handler: ({ params }) => registry.reload(params.id),
    }),
  ];
}
