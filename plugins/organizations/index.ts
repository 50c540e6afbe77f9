import { z } from 'zod';
import { definePlugin, defineRoute, identitySchemas as s, kernelServices, problems, reply, type UserPrincipal } from '../../kernel/plugin-api.ts';

const orgIdParams = s.idParam('id');
const memberSchema = z.object({ user_id: z.number().int(), username: z.string(), email: z.string(), role: z.string(), joined_at: z.string() }).meta({ id: 'OrganizationMember' });

/** The `organizations` router: tenants and their members. */
export default definePlugin({
  deps: { organizations: kernelServices.organizations, groups: kernelServices.groups },
  init: ({ organizations, groups }) => {
    /** Members see their organization; anyone else is told it does not exist. */
    const visible = async (principal: UserPrincipal, id: number) => {
      const org = await organizations.get(id);
      if (!org || (!principal.isPlatformAdmin && !(await organizations.isMember(id, principal.userId)))) throw problems.notFound(`no organization ${id}`);
      return org;
    };
    /** Member management needs org.admin in *that* organization (or a platform admin). */
    const administer = async (principal: UserPrincipal, id: number) => {
      await visible(principal, id);
      if (principal.isPlatformAdmin) return;
      const held = new Set(await groups.capabilitiesOf(principal.userId, id));
      if (!held.has('org.admin') || (principal.scopes && !principal.scopes.has('org.admin'))) throw problems.forbidden('this operation needs the capability "org.admin" in that organization');
    };

    return {
      routes: [
        defineRoute({
          method: 'post',
          path: '',
          summary: 'Create an organization (platform admins); the creator becomes a member',
          description:
            'Creates a tenant: its datasets, projects, groups and connectors are apart from every other organization\'s. The creator becomes a member.',
          security: 'bearer',
          capability: 'organizations.create',
          request: { body: z.object({ name: z.string().trim().min(1).max(200) }) },
          responses: { 201: { description: 'The organization', schema: s.organizationSchema } },
          handler: async ({ body, principal, audit }) => {
            const org = await organizations.create(body.name, principal.userId);
            await audit.record({ action: 'organization.create', targetType: 'organization', targetId: org.id, orgId: org.id, details: { name: org.name } });
            return reply(201, org);
          },
        }),
        defineRoute({
          method: 'get',
          path: '',
          summary: 'Organizations you belong to',
          description:
            'The caller\'s organizations (all of them for a platform admin); each id is a value for the `X-Org-Id` header.',
          security: 'bearer',
          responses: { 200: { description: 'Organizations', schema: z.array(s.organizationSchema) } },
          handler: ({ principal }) => organizations.list(principal.userId),
        }),
        defineRoute({
          method: 'get',
          path: '/{id}',
          summary: 'One organization you belong to',
          description:
            'An organization the caller is a member of (any for a platform admin). Any other id is a 404, whether it exists or not.',
          security: 'bearer',
          request: { params: orgIdParams },
          responses: { 200: { description: 'The organization', schema: s.organizationSchema } },
          handler: ({ params, principal }) => visible(principal, params.id),
        }),
        defineRoute({
          method: 'get',
          path: '/{id}/members',
          summary: 'Members of an organization you belong to',
          description:
            'The users who are members of the organization, with their role. An organization the caller is not a member of is a 404.',
          security: 'bearer',
          request: { params: orgIdParams },
          responses: { 200: { description: 'Members', schema: z.array(memberSchema) } },
          handler: async ({ params, principal }) => {
            await visible(principal, params.id);
            return organizations.members(params.id);
          },
        }),
        defineRoute({
          method: 'post',
          path: '/{id}/members',
          summary: 'Add a member (org.admin of that organization: a user whose home organization it is; platform admins: any user)',
          description:
            'Needs `org.admin` in that organization (403). An organization admin may add users whose home organization it is; a platform admin any user. Adding an existing member is a 409.',
          security: 'bearer',
          request: { params: orgIdParams, body: z.object({ user_id: s.recordId }) },
          responses: { 201: { description: 'Added', schema: z.object({ org_id: z.number().int(), user_id: z.number().int() }) }, 404: { description: 'No such organization among yours, or no such user (without platform admin, no such user whose home organization it is)' }, 409: { description: 'The user is already a member of the organization' } },
          handler: async ({ params, body, principal, audit }) => {
            const id = params.id;
            await administer(principal, id);
            await organizations.addMember(id, body.user_id, { homeOnly: !principal.isPlatformAdmin });
            await audit.record({ security: true, action: 'organization.member.add', targetType: 'user', targetId: body.user_id, orgId: id });
            return reply(201, { org_id: id, user_id: body.user_id });
          },
        }),
        defineRoute({
          method: 'delete',
          path: '/{id}/members/{user_id}',
          summary: 'Remove a member, and their groups there (org.admin of that organization)',
          description:
            'Needs `org.admin` in that organization (403). The user\'s group memberships there go too, and their next request in that organization is refused.',
          security: 'bearer',
          request: { params: z.object({ id: s.pathId, user_id: s.pathId }) },
          responses: { 204: { description: 'Removed' } },
          handler: async ({ params, principal, audit }) => {
            await administer(principal, params.id);
            await organizations.removeMember(params.id, params.user_id);
            await audit.record({ security: true, action: 'organization.member.remove', targetType: 'user', targetId: params.user_id, orgId: params.id });
            return reply(204);
          },
        }),
      ],
    };
  },
});
