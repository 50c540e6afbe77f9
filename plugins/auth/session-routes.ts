import { z } from 'zod';
import { defineRoute, identitySchemas as s } from '../../kernel/plugin-api.ts';
import type { AuthServices } from './services.ts';

/** Sign-in with a password or an identity provider's ID token (spec §4, §5.3). */
export function sessionRoutes({ sessions }: AuthServices) {
  return [
    defineRoute({
      method: 'post',
      path: '/login',
      summary: 'Sign in with username (or e-mail) and password',
      description:
        'Accepts the username or the e-mail address. A wrong password, an unknown user and a deactivated account get the same 401, in the same time; every attempt is audited. The access token (JWT) goes in `Authorization: Bearer` on every other call; when the answer says `must_reset_password`, change the password with POST /api/auth/change-password. This path shares the per-address authentication budget: over it, a 503 with Retry-After.',
      security: 'none',
      request: { body: z.object({ username: z.string().min(1).max(320), password: z.string().min(1).max(1024) }) },
      responses: { 200: { description: 'An access token (JWT)', schema: s.accessTokenSchema }, 401: { description: 'Invalid username or password' } },
      handler: ({ body, audit }) => sessions.login(body.username, body.password, audit),
    }),
    defineRoute({
      method: 'post',
      path: '/google',
      summary: 'Exchange an identity-provider ID token for an access token',
      description:
        'Verifies the provider\'s ID token (signature, issuer, audience, expiry, a verified e-mail address of an allowed domain) and signs the user in; a refused token, or a server without IDP_CLIENT_ID, is a 401 saying why. Answers an access token like POST /api/auth/login.',
      security: 'none',
      request: { body: z.object({ id_token: z.string().min(1).max(16_384) }) },
      responses: { 200: { description: 'An access token (JWT)', schema: s.accessTokenSchema }, 401: { description: 'The ID token was refused (the detail says why), or sign-in with an identity provider is not configured' } },
      handler: ({ body, audit }) => sessions.exchangeIdToken(body.id_token, audit),
    }),
  ];
}
