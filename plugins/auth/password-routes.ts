import crypto from 'node:crypto';
import { z } from 'zod';
import {
  assertStrongPassword,
  defineRoute,
  identitySchemas as s,
  problems,
  type PluginContext,
  type RequestAudit,
} from '../../kernel/plugin-api.ts';
import type { AuthServices } from './services.ts';

const hashResetToken = (token: string) => crypto.createHash('sha256').update(token).digest('hex');

/** A password change ends every earlier JWT of the user, the caller's too: the answer carries the replacement. */
const passwordChangedSchema = z.object({ ...s.statusMessageSchema.shape, ...s.accessTokenSchema.shape });

/** What a failure message may quote of an address (an SMTP refusal names its recipient). */
const ADDRESSES = /[^\s<>"'(),;:]+@[^\s<>"'(),;:]+/g;

/** The same answer, whether or not the address belongs to an account. */
const FORGOT_ANSWER = { status: 'if the address belongs to an account, a reset token has been e-mailed' };

/** Password change, forgotten password and reset (spec §3.2, §5.10); each ends the user's earlier JWTs. */
export function passwordRoutes({ users, sessions, mail, config, logger }: AuthServices, ctx: Pick<PluginContext, 'onDispose'>) {
  /** The lookup, audit, token and mail of a forgot-password request, done after it is answered. */
  const forgotten = async (email: string, audit: RequestAudit) => {
    const user = await users.findByEmail(email);
    await audit.record({ action: 'auth.password.forgot', actor: { userId: null, username: null }, targetType: 'user', targetId: user?.id ?? null, orgId: user?.default_org_id ?? null, details: { known_address: !!user } });
    if (!user?.is_active) return;
    const token = crypto.randomBytes(32).toString('base64url');
    await users.setResetToken(user.id, hashResetToken(token), new Date(Date.now() + config.RESET_TOKEN_TTL_MINUTES * 60_000).toISOString());
    await mail.send({
      to: user.email,
      subject: 'Reset your password',
      text: `Someone asked to reset the password of ${user.username}.\nUse this one-time token within ${config.RESET_TOKEN_TTL_MINUTES} minutes:\n\n${token}\n\nIf it was not you, ignore this mail.\n`,
    });
  };
  // Work still running when the plugin is unloaded (or the kernel stops) is waited for, at most
  // SHUTDOWN_TIMEOUT_MS (an SMTP server that never answers must not hold the shutdown).
  const running = new Set<Promise<void>>();
  ctx.onDispose(async () => {
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<void>((resolve) => (timer = setTimeout(resolve, config.SHUTDOWN_TIMEOUT_MS)));
    await Promise.race([Promise.allSettled([...running]), limit]);
    clearTimeout(timer);
  });

  return [
    defineRoute({
      method: 'post',
      path: '/change-password',
      summary: 'Change your own password (clears must_reset_password); answers a fresh access token',
      description:
        'Checks the old password (400 naming `old_password` when wrong) and the new one\'s strength (400 when weak or equal to the old one). Every earlier JWT of the user, the caller\'s included, stops working: use the access token in the answer from now on. Audited as `auth.password.change`, failures too.',
      security: 'bearer',
      allowDuringPasswordChange: true,
      request: { body: z.object({ old_password: z.string().min(1), new_password: z.string().min(1) }) },
      responses: { 200: { description: 'Password changed; your other sessions (JWTs) are ended, this fresh token replaces them', schema: passwordChangedSchema } },
      handler: async ({ body, principal, audit }) => {
        const user = await users.require(principal.userId);
        if (!(await users.checkPassword(user, body.old_password))) {
          await audit.record({ security: true, action: 'auth.password.change', outcome: 'failure', targetType: 'user', targetId: user.id, details: { reason: 'wrong old password' } });
          throw problems.badRequest('the old password is not correct', [{ path: 'body.old_password', message: 'incorrect' }]);
        }
        if (body.old_password === body.new_password) throw problems.badRequest('password too weak: must differ from the old password', [{ path: 'body.new_password', message: 'must differ from the old password' }]);
        assertStrongPassword(body.new_password, user);
        await users.setPassword(user.id, body.new_password, false);
        await audit.record({ security: true, action: 'auth.password.change', targetType: 'user', targetId: user.id });
        return { status: 'password changed', ...(await sessions.issue({ ...user, must_reset_password: false })) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/forgot-password',
      summary: 'E-mail a one-time reset token; answers the same whether or not the address is known',
      description:
        'Always answers 202 with the same body, whether or not the address belongs to an account, and in the same time: the lookup and the mail happen after the answer. An active account gets a one-time token valid RESET_TOKEN_TTL_MINUTES, to redeem with POST /api/auth/reset-password. Audited as `auth.password.forgot`.',
      security: 'none',
      request: { body: z.object({ email: z.string().min(3).max(320) }) },
      responses: { 202: { description: 'Accepted', schema: s.statusMessageSchema } },
      // Before the answer, a known and an unknown address go through exactly the same steps: the
      // body is validated and the work is queued. The lookup, audit, token and mail run after the
      // answer is written (setImmediate comes after it), so their cost cannot tell the two apart.
      handler: ({ body, audit }) => {
        const job = new Promise<void>((resolve) => setImmediate(resolve))
          .then(() => forgotten(body.email, audit))
          .catch((err: unknown) => logger.error({ err: String((err as Error)?.message ?? err).replace(ADDRESSES, '[address]') }, 'forgot-password could not be completed'))
          .finally(() => running.delete(job));
        running.add(job);
        return FORGOT_ANSWER;
      },
    }),
    defineRoute({
      method: 'post',
      path: '/reset-password',
      summary: 'Redeem a reset token: set a new password and get a fresh access token',
      description:
        'The token from the forgot-password mail is single-use and expires; an unknown, used or expired token is a 400 naming `token`. A weak new password is refused before the token is spent. Ends every earlier JWT of the user and clears `must_reset_password`; audited as `auth.password.reset`.',
      security: 'none',
      request: { body: z.object({ token: z.string().min(1).max(200), new_password: z.string().min(1) }) },
      responses: { 200: { description: 'A fresh access token', schema: s.accessTokenSchema } },
      handler: async ({ body, audit }) => {
        const tokenHash = hashResetToken(body.token);
        const pending = await users.findByResetToken(tokenHash);
        if (!pending) throw problems.badRequest('invalid or expired reset token', [{ path: 'body.token', message: 'invalid or expired' }]);
        assertStrongPassword(body.new_password, pending); // before redeeming: a weak password must not burn the token
        const user = await users.consumeResetToken(tokenHash);
        if (!user) throw problems.badRequest('invalid or expired reset token', [{ path: 'body.token', message: 'invalid or expired' }]);
        await users.setPassword(user.id, body.new_password, false);
        await audit.record({ security: true, action: 'auth.password.reset', actor: { userId: user.id, username: user.username }, targetType: 'user', targetId: user.id, orgId: user.default_org_id });
        return sessions.issue({ ...user, must_reset_password: false });
      },
    }),
  ];
}
