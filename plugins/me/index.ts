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

/** Sorted once per capability set: the identity snapshot hands the same set to every request of a caller. */
const sortedLists = new WeakMap<ReadonlySet<string>, string[]>();
function sorted(capabilities: ReadonlySet<string>): string[] {
  let list = sortedLists.get(capabilities);
  if (!list) sortedLists.set(capabilities, (list = [...capabilities].sort()));
  return list;
}

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
            capabilities: sorted(principal!.capabilities),
            authenticated_via: principal!.via,
          };
        },
      }),
    ],
  }),
});
