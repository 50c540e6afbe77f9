import { z } from 'zod';
import { definePlugin, defineRoute, identitySchemas as s, JsonText, kernelServices } from '../../kernel/plugin-api.ts';

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

/**
 * `GET /api/me`: who you are, where, and what you may do. Front ends ask on every page, so the
 * answer is kept, serialized, in the identity snapshot until identity changes: its basis is the
 * caller's capability set, which the snapshot recomputes (a new object) whenever anything the
 * answer shows could differ.
 */
export default definePlugin({
  deps: { identity: kernelServices.identity },
  init: ({ identity }) => ({
    routes: [
      defineRoute({
        method: 'get',
        path: '',
        summary: 'The current user, organizations, groups, current organization and effective capabilities',
        description:
          'What a client needs after signing in: who you are, the organizations you belong to (ids for `X-Org-Id`), your groups, the current organization (X-Org-Id, else your default one) and the capabilities you hold there, from your role and groups, narrowed by the token\'s scopes.',
        security: 'bearer',
        allowDuringPasswordChange: true,
        responses: { 200: { description: 'You', schema: meSchema }, 403: { description: 'The organization `X-Org-Id` names does not exist or you are not a member' } },
        handler: ({ principal, orgId }) => {
          const { userId, tokenId, via, capabilities } = principal;
          return identity.derived(`me:${userId}:${orgId}:${tokenId}`, capabilities, async () => {
            const answer: z.input<typeof meSchema> = {
              user: (await identity.user(userId))!,
              current_org_id: orgId,
              organizations: await identity.organizationsOf(userId),
              groups: orgId === null ? [] : await identity.groupsOf(userId, orgId),
              capabilities: [...capabilities].sort(),
              authenticated_via: via,
            };
            return new JsonText(answer);
          });
        },
      }),
    ],
  }),
});
