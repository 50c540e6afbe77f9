import { z } from 'zod';
import { defineRoute, identitySchemas as s, kernelServices, problems, type PluginEnablementService, type ServiceType } from '../../kernel/plugin-api.ts';
import { organizationSettingSchema } from './schemas.ts';

const params = z.object({ id: z.string().min(1).describe('Plugin id'), org_id: s.pathId.describe('Organization id') });

/**
 * Per-organization enablement: a member reads, an org admin turns a plugin on or off for the
 * current organization, a platform admin for any. Anyone else naming another organization gets the
 * 404 an organization that does not exist gets, so ids cannot be probed.
 */
export function organizationRoutes(enablement: PluginEnablementService, organizations: ServiceType<typeof kernelServices.organizations>) {
  const reachable = async (principal: { isPlatformAdmin: boolean }, orgId: number, named: number) => {
    if (named === orgId) return;
    if (principal.isPlatformAdmin && (await organizations.get(named))) return;
    throw problems.notFound(`no organization ${named} among yours (send X-Org-Id to work in another of your organizations)`);
  };
  return [
    defineRoute({
      method: 'get',
      path: '/{id}/organizations/{org_id}',
      summary: 'Whether a plugin serves an organization',
      description: 'The current organization for its members; any organization for platform admins.',
      security: 'bearer',
      orgScoped: true,
      capability: 'plugins.read',
      request: { params },
      responses: { 200: { description: 'The organization\u2019s switch for the plugin', schema: organizationSettingSchema } },
      handler: async ({ params, principal, orgId }) => {
        await reachable(principal, orgId, params.org_id);
        return enablement.setting(params.id, params.org_id);
      },
    }),
    defineRoute({
      method: 'put',
      path: '/{id}/organizations/{org_id}',
      summary: 'Turn a plugin on or off for an organization',
      description:
        'An org admin for the current organization, a platform admin for any. Disabled, the plugin\u2019s org-scoped routes answer 404 in that organization and its contributions (connector types, recipe types) are not offered there; the change holds on every instance from its next request. A required plugin cannot be disabled (409).',
      security: 'bearer',
      orgScoped: true,
      capability: 'org.admin',
      request: { params, body: z.object({ enabled: z.boolean() }).strict() },
      responses: { 200: { description: 'The organization\u2019s switch for the plugin, as changed', schema: organizationSettingSchema }, 409: { description: 'The plugin is required: it cannot be disabled for an organization' } },
      handler: async ({ params, body, principal, orgId, audit }) => {
        await reachable(principal, orgId, params.org_id);
        const before = await enablement.setting(params.id, params.org_id);
        const after = await enablement.set(params.id, params.org_id, body.enabled, principal.userId);
        await audit.record({ security: true, action: 'plugin.organization.update', targetType: 'plugin', targetId: params.id, orgId: params.org_id, details: { enabled: after.enabled, was_enabled: before.enabled } });
        return after;
      },
    }),
  ];
}
