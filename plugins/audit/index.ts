import { z } from 'zod';
import { definePlugin, defineRoute, identitySchemas as s, kernelServices } from '../../kernel/plugin-api.ts';

const ACTOR_KINDS = ['user', 'api_key', 'run'] as const;

const auditRecordSchema = z
  .object({
    id: z.number().int(),
    at: z.string(),
    actor_user_id: z.number().int().nullable().describe('The user who acted, or the user a background run acted for'),
    actor_username: z.string().nullable(),
    actor_kind: z.enum(ACTOR_KINDS).nullable().describe('Who acted: a user, a data API key or a background run; null = the platform itself'),
    actor_api_key_id: z.string().nullable(),
    actor_api_key_name: z.string().nullable(),
    actor_authenticator: z.string().nullable().describe('Plugin whose authenticator recognized the API key'),
    actor_run_id: z.number().int().nullable(),
    action: z.string(),
    outcome: z.string(),
    target_type: z.string().nullable(),
    target_id: z.string().nullable(),
    org_id: z.number().int().nullable(),
    ip: z.string().nullable(),
    request_id: z.string().nullable(),
    details: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'AuditRecord' });

const isoTimestamp = z.iso.datetime({ offset: true }).transform((v) => new Date(v).toISOString());

/** The `audit` router: the audit log of your organization (org.admin), or of all (platform admins). */
export default definePlugin({
  deps: { audit: kernelServices.audit },
  init: ({ audit }) => ({
    routes: [
      defineRoute({
        method: 'get',
        path: '',
        summary: 'Audit events, newest first, with filters and cursor paging',
        description: 'org.admin sees the current organization; platform admins see every organization unless `org_id` narrows it.',
        security: 'bearer',
        capability: 'org.admin',
        orgScoped: true,
        request: {
          query: z.object({
            actor: z.string().min(1).optional().describe('User id or username (with the runs acting for that user), `api_key:<id>` or `run:<id>`'),
            actor_kind: z.enum(ACTOR_KINDS).optional(),
            action: z.string().min(1).optional().describe('Exact action, or a prefix ending in * (e.g. token.*)'),
            target: z.string().min(1).optional().describe('Target type, or type:id (e.g. user:12)'),
            since: isoTimestamp.optional(),
            until: isoTimestamp.optional(),
            org_id: s.pathId.optional().describe('Platform admins only: one organization'),
            cursor: z.coerce.number().int().positive().optional().describe('next_cursor of the previous page'),
            limit: z.coerce.number().int().min(1).max(500).default(100),
          }),
        },
        responses: { 200: { description: 'A page of events', schema: z.object({ items: z.array(auditRecordSchema), next_cursor: z.number().int().nullable() }) } },
        handler: ({ query, principal, orgId }) => {
          const { org_id, actor_kind, ...filters } = query;
          return audit.query({ ...filters, actorKind: actor_kind, orgId: principal.isPlatformAdmin ? org_id : orgId });
        },
      }),
    ],
  }),
});
