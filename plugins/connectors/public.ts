/** The connectors plugin's public contract: how a connector-type plugin contributes its type. */
import { z, type ZodObject, type ZodType } from 'zod';
import { defineExtensionPoint, pluginServiceRef, type Principal, type RequestAudit } from '../../kernel/plugin-api.ts';

/** The title of the problem an action answers when its peer answered an error (its status is the peer's). */
export const REMOTE_CALL_FAILED = 'Remote call failed';

/** What an action answers: the body for the caller, and the receiver's status when it failed. */
export interface ActionResult {
  body: unknown;
  /** The remote status; 400 and above is answered to the caller as that status (spec §6: no retry). */
  status?: number;
}

export interface ConnectorAction<A = any> {
  description: string;
  args: ZodType<A>;
  /** `audit` records on behalf of the request that runs the action. */
  run(input: { config: Record<string, unknown>; args: A; orgId: number; principal: Principal; audit: RequestAudit }): Promise<ActionResult>;
}

export interface ConnectorType {
  /** The `type` a connector names, e.g. `workflow_webhook`. */
  type: string;
  description: string;
  /** Validates a connector's `config`; its JSON Schema is published by GET /api/connectors/types. */
  config: ZodObject;
  /** Top-level config fields that are secrets: encrypted at rest, never answered, never audited. */
  secretFields: string[];
  /**
   * Top-level config fields that say where the connector connects (a URL, a host, a port). When an
   * update changes one, every secret field must be given again rather than sent back as the mask:
   * otherwise whoever may edit the connector could point it at their own server and have the
   * stored secret sent there.
   */
  targetFields: string[];
  actions: Record<string, ConnectorAction>;
  /** Checks that the configured peer answers. */
  test?(config: Record<string, unknown>): Promise<{ ok: boolean; message: string }>;
}

/** A zod schema, by what it does (a plugin may hold its own copy of zod). */
const zodSchema = z.custom<ZodType>((value) => typeof (value as { safeParse?: unknown })?.safeParse === 'function', 'must be a zod schema');
const fn = z.custom<(...args: never[]) => unknown>((value) => typeof value === 'function', 'must be a function');

/**
 * The connector types: one per `type` (a second plugin contributing a type of the same name fails
 * to load, and the first keeps serving), each checked against this shape when contributed.
 */
export const connectorTypes = defineExtensionPoint<ConnectorType>({
  id: 'connectors.types',
  key: (type) => type.type,
  schema: z.object({
    type: z.string().regex(/^[a-z][a-z0-9_]{0,62}$/, 'must be lower-case letters, digits and underscores'),
    description: z.string(),
    config: zodSchema,
    secretFields: z.array(z.string()),
    targetFields: z.array(z.string()),
    actions: z.record(z.string(), z.object({ description: z.string(), args: zodSchema, run: fn })),
    test: fn.optional(),
  }),
});

/** Runs connector actions for other plugins (a scenario's `send_message` step, its reporters). */
export interface ConnectorActions {
  /**
   * Runs `action` of the organization's connector `connectorId` with `args`, as
   * POST /api/connectors/{id}/actions/{action} does: the connector's type must be offered in the
   * organization (409 otherwise), its secrets are decrypted for the call only, the call passes the
   * outbound guard, once, without retry, and is audited through `audit`. Problems: 404 for an
   * unknown connector or action, 400 for arguments that fail the action's schema (each field named
   * under `location`, default `body`), 422 for a destination the outbound policy refuses, 502 for a
   * peer that cannot be reached, and the peer's own status (400 and above) when it answered an error.
   */
  run(orgId: number, connectorId: number, action: string, args: unknown, principal: Principal, audit: RequestAudit, location?: string): Promise<ActionResult>;
  /** The organization's connectors of a type (an agent tool looks for its workflow or its messaging provider), oldest first. */
  ofType(orgId: number, type: string): Promise<{ id: number; name: string }[]>;
}

export const connectorActions = pluginServiceRef<ConnectorActions>('connectors.actions');
