import type { Logger } from 'pino';
import type { Storage } from '../../storage/index.ts';
import type { Principal, PrincipalKind } from '../auth/principal.ts';
import type { EventStore } from '../events/event-store.ts';
import { scrubSecrets } from './scrub.ts';
import { SECURITY_EVENT, type SecurityEventPayload } from './security-events.ts';

export interface AuditEvent {
  /** Dotted verb, e.g. `auth.login`, `token.mint`, `group.member.add`. */
  action: string;
  outcome?: 'success' | 'failure';
  targetType?: string;
  targetId?: string | number | null;
  /** Organization the event belongs to; defaults to the request's current organization. */
  orgId?: number | null;
  /** Actor when there is no authenticated principal yet (e.g. a failed login names the username). */
  actor?: { userId: number | null; username: string | null };
  details?: Record<string, unknown>;
  /**
   * A security event (a failed sign-in, a token minted, a member added…): the row is published as
   * the durable event `audit.security_event` as well, in its transaction.
   */
  security?: boolean;
}

/**
 * Where an event happens: a request (its id, client address, and once resolved the caller and
 * organization), or work outside any request acting as a principal (a background run).
 */
export interface AuditOrigin {
  requestId?: string;
  ip?: string;
  principal?: Principal;
  orgId?: number;
}

/** The audit log as one request (or one principal's work) sees it: events carry its actor, organization, address and id. */
export interface RequestAudit {
  record(event: AuditEvent): Promise<void>;
}

export interface AuditRecord {
  id: number;
  at: string;
  /** The user who acted, or the user a background run acted for. */
  actor_user_id: number | null;
  actor_username: string | null;
  /** Who acted: a user, a data API key or a background run; null for the platform itself. */
  actor_kind: PrincipalKind | null;
  actor_api_key_id: string | null;
  actor_api_key_name: string | null;
  /** Plugin whose authenticator recognized the API key. */
  actor_authenticator: string | null;
  actor_run_id: number | null;
  action: string;
  outcome: string;
  target_type: string | null;
  target_id: string | null;
  org_id: number | null;
  ip: string | null;
  request_id: string | null;
  details: Record<string, unknown>;
}

export interface AuditQuery {
  /** Restrict to one organization; undefined = every organization (platform admins). */
  orgId?: number;
  /** A user id or username (also matching the runs acting for that user), `api_key:<id>` or `run:<id>`. */
  actor?: string;
  actorKind?: PrincipalKind;
  action?: string;
  target?: string;
  since?: string;
  until?: string;
  /** Id of the last row of the previous page; pages go from newest to oldest. */
  cursor?: number;
  limit: number;
}

/**
 * The append-only audit log (the table refuses updates and deletes). Actor, client address and
 * request id come from the request the event happens in (passed explicitly: an AsyncLocalStorage
 * would put a hook on every promise of every request); details are scrubbed of anything secret-looking.
 */
export class AuditService {
  constructor(
    private readonly storage: Storage,
    private readonly logger: Logger,
    /** Where a security event (`security: true`) is published with its audit row. */
    private readonly events: EventStore,
    /** The publisher id of the kernel's own events. */
    private readonly publisher: string,
  ) {}

  /** Records on behalf of one request; every route handler gets this as `audit`. */
  for(request: AuditOrigin): RequestAudit {
    return new AuditOnBehalf(this, request);
  }

  /** Records as `principal` acting in `orgId`, with no request (background work): rows name the run and the user it acts for. */
  forPrincipal(principal: Principal, orgId: number | null): RequestAudit {
    return new AuditOnBehalf(this, { principal, orgId: orgId ?? undefined });
  }

  /** Records an event; `request` is absent for what no request nor principal causes (start-up). */
  async record(event: AuditEvent, request: AuditOrigin | undefined): Promise<void> {
    const row = {
      at: this.storage.now(),
      ...actorColumns(event.actor, request?.principal),
      action: event.action,
      outcome: event.outcome ?? 'success',
      target_type: event.targetType ?? null,
      target_id: event.targetId == null ? null : String(event.targetId),
      org_id: event.orgId === undefined ? (request?.orgId ?? null) : event.orgId,
      ip: request?.ip ?? null,
      request_id: request?.requestId ?? null,
      details: scrubSecrets(event.details ?? {}) as Record<string, unknown>,
    };
    const stored = { ...row, details: this.storage.encodeJson(row.details) };
    if (event.security) {
      await this.storage.transaction(async (trx) => {
        const { id } = await trx.insertInto('audit_log').values(stored).returning('id').executeTakeFirstOrThrow();
        const { actor_api_key_id: _key, actor_api_key_name: _name, actor_authenticator: _by, actor_run_id: _run, request_id: _request, org_id: orgId, ...rest } = row;
        const payload: SecurityEventPayload = { audit_id: Number(id), ...rest };
        await this.events.publish(trx, this.publisher, { type: SECURITY_EVENT, orgId, payload });
      });
    } else {
      await this.storage.db.insertInto('audit_log').values(stored).execute();
    }
    this.logger.info({ audit: event.action, outcome: row.outcome, target: row.target_id }, 'audit');
  }

  async query(q: AuditQuery): Promise<{ items: AuditRecord[]; next_cursor: number | null }> {
    let query = this.storage.db.selectFrom('audit_log').selectAll().orderBy('id', 'desc').limit(q.limit + 1);
    if (q.orgId !== undefined) query = query.where('org_id', '=', q.orgId);
    if (q.actor !== undefined) query = whereActor(query, q.actor);
    if (q.actorKind !== undefined) query = query.where('actor_kind', '=', q.actorKind);
    if (q.action !== undefined) query = q.action.endsWith('*') ? query.where('action', 'like', `${q.action.slice(0, -1)}%`) : query.where('action', '=', q.action);
    if (q.target !== undefined) {
      const [type, id] = q.target.includes(':') ? q.target.split(':', 2) : [q.target, undefined];
      query = query.where('target_type', '=', type);
      if (id !== undefined) query = query.where('target_id', '=', id);
    }
    if (q.since !== undefined) query = query.where('at', '>=', q.since);
    if (q.until !== undefined) query = query.where('at', '<', q.until);
    if (q.cursor !== undefined) query = query.where('id', '<', q.cursor);
    const rows = await query.execute();
    const page = rows.slice(0, q.limit).map(
      (r) => ({ ...r, actor_kind: r.actor_kind ?? legacyActorKind(r as AuditRecord), details: this.storage.decodeJson<Record<string, unknown>>(r.details) ?? {} }) as AuditRecord,
    );
    return { items: page, next_cursor: rows.length > q.limit ? page[page.length - 1].id : null };
  }
}

type ActorColumns = Pick<AuditRecord, 'actor_user_id' | 'actor_username' | 'actor_kind' | 'actor_api_key_id' | 'actor_api_key_name' | 'actor_authenticator' | 'actor_run_id'>;

const NO_ACTOR: ActorColumns = { actor_user_id: null, actor_username: null, actor_kind: null, actor_api_key_id: null, actor_api_key_name: null, actor_authenticator: null, actor_run_id: null };

/** Who acted, as columns: an actor named by the event (no principal yet, e.g. a failed login) wins over the principal. */
function actorColumns(actor: AuditEvent['actor'], principal: Principal | undefined): ActorColumns {
  if (actor) return { ...NO_ACTOR, actor_kind: 'user', actor_user_id: actor.userId, actor_username: actor.username };
  if (!principal) return NO_ACTOR;
  switch (principal.kind) {
    case 'user':
      return { ...NO_ACTOR, actor_kind: 'user', actor_user_id: principal.userId, actor_username: principal.username };
    case 'run':
      return { ...NO_ACTOR, actor_kind: 'run', actor_run_id: principal.runId, actor_user_id: principal.onBehalfOf.userId, actor_username: principal.onBehalfOf.username };
    case 'api_key':
      return { ...NO_ACTOR, actor_kind: 'api_key', actor_api_key_id: principal.keyId, actor_api_key_name: principal.name, actor_authenticator: principal.authenticator };
  }
}

/** Rows written before actor_kind existed named users only (the log is append-only: they are not rewritten). */
function legacyActorKind(row: { actor_user_id: number | null; actor_username: string | null }): PrincipalKind | null {
  return row.actor_user_id !== null || row.actor_username !== null ? 'user' : null;
}

const API_KEY_ACTOR = /^api_key:(.+)$/;
const RUN_ACTOR = /^run:(\d{1,15})$/;

/** `api_key:<id>`, `run:<id>`, a user id or a username. */
function whereActor<Q extends { where: (...args: any[]) => Q }>(query: Q, actor: string): Q {
  const key = API_KEY_ACTOR.exec(actor);
  if (key) return query.where('actor_api_key_id', '=', key[1]);
  const run = RUN_ACTOR.exec(actor);
  if (run) return query.where('actor_run_id', '=', Number(run[1]));
  return /^\d+$/.test(actor) ? query.where('actor_user_id', '=', Number(actor)) : query.where('actor_username', '=', actor);
}

/** The audit log bound to one request (a class: a handler gets one on every request). */
class AuditOnBehalf implements RequestAudit {
  constructor(
    private readonly service: AuditService,
    private readonly request: AuditOrigin,
  ) {}

  record(event: AuditEvent): Promise<void> {
    return this.service.record(event, this.request);
  }
}
