import { z } from 'zod';
import { definePlugin, defineRoute, identitySchemas as s, kernelServices, problems, reply } from '../../kernel/plugin-api.ts';

const groupIdParams = s.idParam('id');
const memberParams = z.object({ id: s.pathId, user_id: s.pathId });

/** The `groups` router: groups of the current organization, carrying capabilities. */
export default definePlugin({
  deps: { groups: kernelServices.groups, capabilities: kernelServices.capabilities },
  init: ({ groups, capabilities }) => {
    const capabilityList = z.array(z.string()).max(200);
    /** Known capabilities that work inside one organization; a platform-wide one would let an org admin reach every tenant. */
    const requireGrantable = (names: string[] | undefined) => {
      const unknown = (names ?? []).filter((n) => !capabilities.has(n));
      if (unknown.length) throw problems.badRequest(`unknown capabilities: ${unknown.join(', ')} (GET /api/auth/scopes lists them)`, unknown.map((n) => ({ path: `body.capabilities.${names!.indexOf(n)}`, message: `unknown capability ${n}` })));
      const platformWide = (names ?? []).filter((n) => capabilities.isPlatformWide(n));
      if (platformWide.length) {
        throw problems.badRequest(
          `platform-wide capabilities cannot be granted through a group: ${platformWide.join(', ')} (only the admin role holds them)`,
          platformWide.map((n) => ({ path: `body.capabilities.${names!.indexOf(n)}`, message: `platform-wide capability ${n}` })),
        );
      }
    };
    const base = { security: 'bearer', orgScoped: true } as const;

    return {
      routes: [
        defineRoute({
          ...base,
          method: 'post',
          path: '',
          summary: 'Create a group in the current organization (org.admin)',
          description:
            'A group gives its members capabilities in this organization, on top of their role. Capability names must exist (400; GET /api/auth/scopes lists them) and be ones a group may carry (400); group names are unique in the organization (409).',
          capability: 'org.admin',
          request: { body: z.object({ name: z.string().trim().min(1).max(200), description: z.string().max(2000).nullable().optional(), capabilities: capabilityList.default([]) }) },
          responses: { 201: { description: 'The group', schema: s.groupSchema }, 409: { description: 'A group with this name already exists in the organization' } },
          handler: async ({ body, orgId, audit }) => {
            requireGrantable(body.capabilities);
            const group = await groups.create(orgId, body);
            await audit.record({ security: true, action: 'group.create', targetType: 'group', targetId: group.id, details: { name: group.name, capabilities: group.capabilities } });
            return reply(201, group);
          },
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '',
          summary: 'Groups of the current organization',
          description:
            'Every group of the current organization with the capabilities it grants.',
          capability: 'groups.read',
          responses: { 200: { description: 'Groups', schema: z.array(s.groupSchema) } },
          handler: ({ orgId }) => groups.list(orgId),
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/{id}',
          summary: 'One group',
          description:
            'A group of the current organization with its capabilities. A group of another organization is a 404.',
          capability: 'groups.read',
          request: { params: groupIdParams },
          responses: { 200: { description: 'The group', schema: s.groupSchema } },
          handler: ({ params, orgId }) => groups.get(orgId, params.id),
        }),
        defineRoute({
          ...base,
          method: 'patch',
          path: '/{id}',
          summary: 'Rename a group or replace its capabilities (org.admin)',
          description:
            'The capability list given replaces the old one, checked as on creation (400). Members\' effective capabilities change on their next request.',
          capability: 'org.admin',
          request: {
            params: groupIdParams,
            body: z
              .object({ name: z.string().trim().min(1).max(200).optional(), description: z.string().max(2000).nullable().optional(), capabilities: capabilityList.optional() })
              .refine((b) => Object.keys(b).length > 0, 'give at least one field to change'),
          },
          responses: { 200: { description: 'The group', schema: s.groupSchema }, 409: { description: 'A group with this name already exists in the organization' } },
          handler: async ({ params, body, orgId, audit }) => {
            requireGrantable(body.capabilities);
            const before = await groups.get(orgId, params.id);
            const after = await groups.update(orgId, params.id, body);
            await audit.record({
              action: body.capabilities ? 'group.capabilities.change' : 'group.update',
              targetType: 'group',
              targetId: after.id,
              details: { name: { from: before.name, to: after.name }, capabilities: { from: before.capabilities, to: after.capabilities } },
            });
            return after;
          },
        }),
        defineRoute({
          ...base,
          method: 'delete',
          path: '/{id}',
          summary: 'Delete a group (org.admin)',
          description:
            'Deletes the group and its memberships: its members lose the capabilities it gave from their next request.',
          capability: 'org.admin',
          request: { params: groupIdParams },
          responses: { 204: { description: 'Deleted' } },
          handler: async ({ params, orgId, audit }) => {
            const group = await groups.get(orgId, params.id);
            await groups.remove(orgId, group.id);
            await audit.record({ security: true, action: 'group.delete', targetType: 'group', targetId: group.id, details: { name: group.name, capabilities: group.capabilities } });
            return reply(204);
          },
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/{id}/members',
          summary: 'Members of a group',
          description:
            'The users in the group, with their usernames.',
          capability: 'groups.read',
          request: { params: groupIdParams },
          responses: { 200: { description: 'Members', schema: z.array(z.object({ user_id: z.number().int(), username: z.string() })) } },
          handler: ({ params, orgId }) => groups.members(orgId, params.id),
        }),
        defineRoute({
          ...base,
          method: 'post',
          path: '/{id}/members',
          summary: 'Add a member of the organization to a group (org.admin)',
          description:
            'The user must be a member of the organization; one already in the group is a 409. They gain the group\'s capabilities on their next request.',
          capability: 'org.admin',
          request: { params: groupIdParams, body: z.object({ user_id: s.recordId }) },
          responses: { 201: { description: 'Added', schema: z.object({ group_id: z.number().int(), user_id: z.number().int() }) }, 409: { description: 'The user is already in the group' }, 422: { description: 'The user (`user_id`) is not a member of the organization' } },
          handler: async ({ params, body, orgId, audit }) => {
            await groups.addMember(orgId, params.id, body.user_id);
            await audit.record({ security: true, action: 'group.member.add', targetType: 'group', targetId: params.id, details: { user_id: body.user_id } });
            return reply(201, { group_id: params.id, user_id: body.user_id });
          },
        }),
        defineRoute({
          ...base,
          method: 'delete',
          path: '/{id}/members/{user_id}',
          summary: 'Remove a member from a group (org.admin)',
          description:
            'The user loses the capabilities this group gave on their next request; other groups and their role are untouched.',
          capability: 'org.admin',
          request: { params: memberParams },
          responses: { 204: { description: 'Removed' } },
          handler: async ({ params, orgId, audit }) => {
            await groups.removeMember(orgId, params.id, params.user_id);
            await audit.record({ security: true, action: 'group.member.remove', targetType: 'group', targetId: params.id, details: { user_id: params.user_id } });
            return reply(204);
          },
        }),
      ],
    };
  },
});
