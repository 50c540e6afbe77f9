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
      security: 'none',
      request: { body: z.object({ username: z.string().min(1).max(320), password: z.string().min(1).max(1024) }) },
      responses: { 200: { description: 'An access token (JWT)', schema: s.accessTokenSchema } },
      handler: ({ body, audit }) => sessions.login(body.username, body.password, audit),
    }),
    defineRoute({
      method: 'post',
      path: '/google',
      summary: 'Exchange an identity-provider ID token for an access token',
      security: 'none',
      request: { body: z.object({ id_token: z.string().min(1).max(16_384) }) },
      responses: { 200: { description: 'An access token (JWT)', schema: s.accessTokenSchema } },
      handler: ({ body, audit }) => sessions.exchangeIdToken(body.id_token, audit),
    }),
  ];
}
