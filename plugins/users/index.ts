import { z } from 'zod';
import {
  assertStrongPassword,
  definePlugin,
  defineRoute,
  identitySchemas as s,
  kernelServices,
  problems,
  randomPassword,
  reply,
  toPublicUser,
} from '../../kernel/plugin-api.ts';

const userIdParams = s.idParam('user_id');
const pageQuery = z.object({ limit: z.coerce.number().int().min(1).max(500).default(50), offset: z.coerce.number().int().min(0).default(0) });

/** The `users` router (platform admins): accounts, deactivation and admin password resets. */
export default definePlugin({
  deps: { users: kernelServices.users, organizations: kernelServices.organizations, mail: kernelServices.mail },
  init: ({ users, organizations, mail }) => {
    const mailTemporaryPassword = (to: string, username: string, password: string, reason: string) =>
      mail.send({
        to,
        subject: 'Your temporary password',
        text: `${reason}\nUsername: ${username}\nTemporary password (you must change it when you sign in):\n\n${password}\n`,
      });
    const requireOrganization = async (id: number | null | undefined) => {
      if (id != null && !(await organizations.get(id))) throw problems.unprocessable(`organization ${id} does not exist`, [{ path: 'body.default_org_id', message: 'no such organization' }]);
    };

    return {
      routes: [
        defineRoute({
          method: 'post',
          path: '',
          summary: 'Create a user (without a password, a temporary one is e-mailed)',
          description:
            'Creates an account with a role and a default (home) organization (422 when it does not exist). Without a password, a temporary one is e-mailed. Either way the user gets `must_reset_password` and should change it at first sign-in. Usernames and e-mail addresses are unique (409).',
          security: 'bearer',
          capability: 'users.manage',
          request: {
            body: z.object({
              username: z.string().trim().min(3).max(64).regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, dot, dash and underscore only'),
              email: z.email().max(320),
              role: s.roleSchema,
              password: z.string().min(1).optional(),
              default_org_id: s.recordId.optional().describe('Default: your current organization'),
            }),
          },
          responses: { 201: { description: 'The new user', schema: s.userSchema }, 409: { description: 'A user with this username or e-mail already exists' }, 422: { description: 'The default organization (`default_org_id`) does not exist' } },
          handler: async ({ body, orgId, audit }) => {
            const defaultOrgId = body.default_org_id ?? orgId;
            await requireOrganization(defaultOrgId);
            if (body.password) assertStrongPassword(body.password, body, 'password');
            const password = body.password ?? randomPassword();
            const user = await users.create({ username: body.username, email: body.email, role: body.role, password, defaultOrgId, mustResetPassword: true });
            await audit.record({ security: true, action: 'user.create', targetType: 'user', targetId: user.id, details: { username: user.username, role: user.role, default_org_id: defaultOrgId } });
            if (!body.password) await mailTemporaryPassword(user.email, user.username, password, 'An account was created for you.');
            return reply(201, toPublicUser(user));
          },
        }),
        defineRoute({
          method: 'get',
          path: '',
          summary: 'List users, paged',
          description:
            'Every user account of the platform, active or not, paged with `limit` and `offset`. For platform admins (`users.manage`).',
          security: 'bearer',
          capability: 'users.manage',
          request: { query: pageQuery },
          responses: {
            200: { description: 'A page of users', schema: z.object({ items: z.array(s.userSchema), total: z.number().int(), limit: z.number().int(), offset: z.number().int() }) },
          },
          handler: async ({ query }) => {
            const { items, total } = await users.list(query);
            return { items: items.map(toPublicUser), total, ...query };
          },
        }),
        defineRoute({
          method: 'get',
          path: '/{user_id}',
          summary: 'One user',
          description:
            'A user account: username, e-mail, role, default organization, active flag and `must_reset_password`. Never the password hash.',
          security: 'bearer',
          capability: 'users.manage',
          request: { params: userIdParams },
          responses: { 200: { description: 'The user', schema: s.userSchema } },
          handler: async ({ params }) => toPublicUser(await users.require(params.user_id)),
        }),
        defineRoute({
          method: 'patch',
          path: '/{user_id}',
          summary: 'Change role, e-mail, default organization or (re)activate',
          description:
            'Changes only the fields given. A default organization must exist (422). You cannot change your own role or deactivate yourself (409). Deactivating ends the user\'s sessions and tokens at once.',
          security: 'bearer',
          capability: 'users.manage',
          request: {
            params: userIdParams,
            body: z
              .object({ role: s.roleSchema.optional(), email: z.email().max(320).optional(), default_org_id: s.recordId.nullable().optional(), is_active: z.boolean().optional() })
              .refine((b) => Object.keys(b).length > 0, 'give at least one field to change'),
          },
          responses: { 200: { description: 'The updated user', schema: s.userSchema }, 409: { description: 'You cannot deactivate yourself or change your own role, or another user already has this e-mail' }, 422: { description: 'The default organization (`default_org_id`) does not exist' } },
          handler: async ({ params, body, principal, audit }) => {
            const id = params.user_id;
            if (id === principal.userId && (body.is_active === false || (body.role && body.role !== principal.role))) {
              throw problems.conflict('you cannot deactivate yourself or change your own role');
            }
            await requireOrganization(body.default_org_id);
            const before = await users.require(id);
            const after = await users.update(id, body);
            const changes = Object.fromEntries(Object.keys(body).map((k) => [k, { from: before[k as keyof typeof before], to: after[k as keyof typeof after] }]));
            await audit.record({ security: true, action: 'user.update', targetType: 'user', targetId: id, details: { changes } });
            return toPublicUser(after);
          },
        }),
        defineRoute({
          method: 'delete',
          path: '/{user_id}',
          summary: 'Deactivate a user: their JWTs and tokens stop working at once',
          description:
            'The account is kept but can no longer sign in, and its JWTs and personal access tokens are refused from the next request. Reactivate with PATCH. You cannot deactivate yourself (409).',
          security: 'bearer',
          capability: 'users.manage',
          request: { params: userIdParams },
          responses: { 200: { description: 'The deactivated user', schema: s.userSchema }, 409: { description: 'You cannot deactivate yourself' } },
          handler: async ({ params, principal, audit }) => {
            const id = params.user_id;
            if (id === principal.userId) throw problems.conflict('you cannot deactivate yourself');
            await users.require(id);
            const user = await users.update(id, { is_active: false });
            await audit.record({ security: true, action: 'user.deactivate', targetType: 'user', targetId: id });
            return toPublicUser(user);
          },
        }),
        defineRoute({
          method: 'post',
          path: '/{user_id}/reset-password',
          summary: 'Reset a user\u2019s password: a temporary one is e-mailed and must be changed',
          description:
            'Sets a new temporary password, e-mails it to the user and sets `must_reset_password`, so the user must choose a new one after signing in.',
          security: 'bearer',
          capability: 'users.manage',
          request: { params: userIdParams },
          responses: { 202: { description: 'Temporary password e-mailed', schema: s.statusMessageSchema } },
          handler: async ({ params, audit }) => {
            const user = await users.require(params.user_id);
            const password = randomPassword();
            await users.setPassword(user.id, password, true);
            await audit.record({ security: true, action: 'user.password.reset_by_admin', targetType: 'user', targetId: user.id });
            await mailTemporaryPassword(user.email, user.username, password, 'An administrator reset your password.');
            return reply(202, { status: 'a temporary password has been e-mailed' });
          },
        }),
      ],
    };
  },
});
