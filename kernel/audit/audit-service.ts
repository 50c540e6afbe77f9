import type { Logger } from 'pino';
import type { Storage } from '../../storage/index.ts';
import { scrubSecrets } from './scrub.ts';

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
}

/** The request an event happens in: its id, client address, and (once resolved) caller and organization. */
export interface AuditOrigin {
  requestId: string;
  ip: string;
  principal?: { userId: number; username: string };
  orgId?: number;
}

/** The audit log as one request sees it: events carry the request's actor, organization, address and id. */
export interface RequestAudit {
  record(event: AuditEvent): Promise<void>;
}

export interface AuditRecord {
  id: number;
  at: string;
  actor_user_id: number | null;
  actor_username: string | null;
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
  actor?: string;
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
  ) {}

  /** Records on behalf of one request; every route handler gets this as `audit`. */
  for(request: AuditOrigin): RequestAudit {
    return new AuditOnBehalf(this, request);
  }

  /** Records an event; `request` is absent for what no request causes (start-up, scheduled work). */
  async record(event: AuditEvent, request: AuditOrigin | undefined): Promise<void> {
    const principal = request?.principal;
    const row = {
      at: this.storage.now(),
      actor_user_id: event.actor?.userId ?? principal?.userId ?? null,
      actor_username: event.actor?.username ?? principal?.username ?? null,
      action: event.action,
      outcome: event.outcome ?? 'success',
      target_type: event.targetType ?? null,
      target_id: event.targetId == null ? null : String(event.targetId),
      org_id: event.orgId === undefined ? (request?.orgId ?? null) : event.orgId,
      ip: request?.ip ?? null,
      request_id: request?.requestId ?? null,
      details: this.storage.encodeJson(scrubSecrets(event.details ?? {})),
    };
    await this.storage.db.insertInto('audit_log').values(row).execute();
    this.logger.info({ audit: event.action, outcome: row.outcome, target: row.target_id }, 'audit');
  }

  async query(q: AuditQuery): Promise<{ items: AuditRecord[]; next_cursor: number | null }> {
    let query = this.storage.db.selectFrom('audit_log').selectAll().orderBy('id', 'desc').limit(q.limit + 1);
    if (q.orgId !== undefined) query = query.where('org_id', '=', q.orgId);
    if (q.actor !== undefined) query = /^\d+$/.test(q.actor) ? query.where('actor_user_id', '=', Number(q.actor)) : query.where('actor_username', '=', q.actor);
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
    const page = rows.slice(0, q.limit).map((r) => ({ ...r, details: this.storage.decodeJson<Record<string, unknown>>(r.details) ?? {} }) as AuditRecord);
    return { items: page, next_cursor: rows.length > q.limit ? page[page.length - 1].id : null };
  }
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
