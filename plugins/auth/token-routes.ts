import { z } from 'zod';
import { defineRoute, identitySchemas as s, problems, reply, type UserPrincipal } from '../../kernel/plugin-api.ts';
import type { AuthServices } from './services.ts';

const MAX_LIFETIME_DAYS = 3650;

/**
 * Managing tokens needs the owner's full say: a scoped token (say `plugins.read` only) could
 * otherwise mint an unscoped one, or revoke the owner's other tokens (GitLab asks its `api` scope).
 */
function requireUnscoped(principal: UserPrincipal) {
  if (principal.scopes) throw problems.forbidden('a scoped token cannot manage tokens: use a JWT or an unscoped token');
}

const mintedSchema = s.tokenInfoSchema
  .extend({ token: z.string().describe('The secret: shown this once, never again') })
  .meta({ id: 'MintedPersonalAccessToken' });

/** Personal access tokens: mint, list, revoke; org-admin governance (spec §2.3, §3.1, §5.5–5.9). */
export function tokenRoutes({ tokens, capabilities }: AuthServices) {
  return [
    defineRoute({
      method: 'post',
      path: '/tokens',
      summary: 'Mint a personal access token (the secret is shown once)',
      description:
        'A personal access token (`svc_…`) works like a JWT in `Authorization: Bearer` until it expires or is revoked. `scopes` narrows it to some of your capabilities (GET /api/auth/scopes lists the names; unknown ones or ones you do not hold are a 400); without scopes it carries all of yours. The secret is answered only here: store it. At most PAT_MAX_PER_USER active tokens per user (409). A scoped token cannot manage tokens (403).',
      security: 'bearer',
      request: {
        body: z.object({
          name: z.string().trim().min(1).max(200),
          scopes: z.array(z.string()).max(200).optional().describe('Capability names; omitted = the owner\u2019s full permissions'),
          expires_in_days: z.number().int().min(0).max(MAX_LIFETIME_DAYS).default(90).describe('Lifetime in days; 0 = never expires'),
        }),
      },
      responses: { 201: { description: 'The token, with its secret', schema: mintedSchema }, 409: { description: 'You already hold PAT_MAX_PER_USER active tokens: revoke one first' } },
      handler: async ({ body, principal, audit }) => {
        requireUnscoped(principal);
        if (body.scopes) {
          const unknown = body.scopes.filter((name) => !capabilities.has(name));
          if (unknown.length) throw problems.badRequest(`unknown scopes: ${unknown.join(', ')} (GET /api/auth/scopes lists them)`, unknown.map((name) => ({ path: `body.scopes.${body.scopes!.indexOf(name)}`, message: `unknown scope ${name}` })));
          const beyond = body.scopes.filter((name) => !principal.capabilities.has(name));
          if (beyond.length) throw problems.badRequest(`scopes beyond your own permissions: ${beyond.join(', ')}`, beyond.map((name) => ({ path: `body.scopes.${body.scopes!.indexOf(name)}`, message: `you do not hold ${name}` })));
        }
        const { secret, info } = await tokens.mint(principal.userId, { name: body.name, scopes: body.scopes ?? null, expiresInDays: body.expires_in_days });
        await audit.record({ security: true, action: 'token.mint', targetType: 'token', targetId: info.id, details: { token_name: info.name, scopes: info.scopes, expires_at: info.expires_at } });
        return reply(201, { ...info, token: secret });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tokens',
      summary: 'Your tokens, without secrets',
      description:
        'The caller\'s personal access tokens, revoked and expired ones included, with their scopes, expiry and last use; never their secrets. A scoped token cannot list tokens (403).',
      security: 'bearer',
      responses: { 200: { description: 'Token metadata', schema: z.array(s.tokenInfoSchema) } },
      handler: ({ principal }) => {
        requireUnscoped(principal);
        return tokens.listForUser(principal.userId);
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/tokens/{id}',
      summary: 'Revoke one of your tokens',
      description:
        'Revocation takes effect on the next request made with the token. Only your own tokens: another user\'s is a 404. A scoped token cannot revoke tokens (403).',
      security: 'bearer',
      allowDuringPasswordChange: true, // logging out, for a token's holder
      request: { params: s.idParam('id') },
      responses: { 200: { description: 'The revoked token', schema: s.tokenInfoSchema }, 403: { description: 'A scoped token cannot manage tokens: use a JWT or an unscoped token' } },
      handler: async ({ params, principal, audit }) => {
        requireUnscoped(principal);
        const { info, revokedNow } = await tokens.revokeOwn(principal.userId, params.id);
        if (revokedNow) await audit.record({ security: true, action: 'token.revoke', targetType: 'token', targetId: info.id, details: { token_name: info.name } });
        return info;
      },
    }),
    defineRoute({
      method: 'get',
      path: '/tokens/admin',
      summary: 'Every token of the members whose home organization this is (org.admin)',
      description:
        'For organization admins: the tokens of the users whose home (default) organization is the current one, without secrets, so a leaked or forgotten token can be found and revoked.',
      security: 'bearer',
      capability: 'org.admin',
      orgScoped: true,
      responses: { 200: { description: 'Token metadata', schema: z.array(s.tokenInfoSchema) } },
      handler: ({ orgId, principal }) => tokens.listForOrganization(orgId, principal.isPlatformAdmin),
    }),
    defineRoute({
      method: 'delete',
      path: '/tokens/admin/{id}',
      summary: 'Revoke any token of a member whose home organization this is (org.admin)',
      description:
        'For organization admins: revokes a token of a user whose home organization is the current one; any other token is a 404. Takes effect on the token\'s next request.',
      security: 'bearer',
      capability: 'org.admin',
      orgScoped: true,
      request: { params: s.idParam('id') },
      responses: { 200: { description: 'The revoked token', schema: s.tokenInfoSchema } },
      handler: async ({ params, orgId, principal, audit }) => {
        const { info, revokedNow } = await tokens.revokeInOrganization(orgId, params.id, principal);
        if (revokedNow) await audit.record({ security: true, action: 'token.revoke', targetType: 'token', targetId: info.id, details: { token_name: info.name, owner_id: info.user_id, by_org_admin: true } });
        return info;
      },
    }),
    defineRoute({
      method: 'get',
      path: '/scopes',
      summary: 'Valid scope names for tokens: the capabilities loaded plugins define',
      description:
        'The capabilities of the loaded plugins with their descriptions: the names POST /api/auth/tokens accepts in `scopes`. Changes when plugins are loaded or unloaded.',
      security: 'bearer',
      responses: {
        200: {
          description: 'Scopes',
          schema: z.array(
            z.object({
              name: z.string(),
              description: z.string(),
              plugin_id: z.string(),
              roles: z.array(z.string()),
              scope: z.enum(['organization', 'platform']).describe('`organization`: may be granted through groups; `platform`: through role baselines only'),
            }),
          ),
        },
      },
      handler: () => capabilities.list().map((c) => ({ ...c, roles: [...c.roles] })).sort((a, b) => a.name.localeCompare(b.name)),
    }),
  ];
}
