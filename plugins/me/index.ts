import { z } from 'zod';
import { definePlugin, defineRoute, identitySchemas as s, kernelServices } from '../../kernel/plugin-api.ts';

const meSchema = z
  .object({
    user: s.userSchema,
    current_org_id: z.number().int().nullable().describe('X-Org-Id, else the default organization'),
    organizations: z.array(s.organizationSchema),
    groups: z.array(s.groupSchema).describe('Your groups in the current organization'),
    capabilities: z.array(z.string()).describe('Effective capabilities of this request'),
    authenticated_via: z.enum(['jwt', 'pat']),
  })
  .meta({ id: 'Me' });

/** `GET /api/me`: who you are, where, and what you may do. */
export default definePlugin({
  deps: { identity: kernelServices.identity },
  init: ({ identity }) => ({
    routes: [
      defineRoute({
        method: 'get',
        path: '',
        summary: 'The current user, organizations, groups, current organization and effective capabilities',
        security: 'bearer',
        responses: { 200: { description: 'You', schema: meSchema } },
        handler: async ({ principal, orgId }) => {
          // Each read is at hand once the snapshot holds it (authentication just read the user).
          const { userId } = principal!;
          return {
            user: (await identity.user(userId))!,
            current_org_id: orgId,
            organizations: await identity.organizationsOf(userId),
            groups: orgId === null ? [] : await identity.groupsOf(userId, orgId),
            capabilities: [...principal!.capabilities].sort(),
            authenticated_via: principal!.via,
          };
        },
      }),
    ],
  }),
});
