import { ChangeCountedCache, problems, z, type DomainEvents } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import { roundUsd, type CallLog, type SpendScope } from './call-log.ts';
import { QUOTA_ALERT_EVENT, type QuotaAlertEvent } from './public.ts';
import { LLM_MESH_COUNTER } from './migrations.ts';

export const QUOTA_SCOPES = ['organization', 'project', 'user', 'connection'] as const;

export const quotaInputSchema = z
  .object({
    scope: z.enum(QUOTA_SCOPES).describe('What the quota counts: all the organization\u2019s calls, or one project\u2019s, user\u2019s or connection\u2019s'),
    scope_id: z.number().int().min(1).max(2 ** 31 - 1).nullable().default(null).describe('The project, user or connection; null for organization'),
    amount_usd: z.number().positive().max(1e9),
    period: z.enum(['month', 'rolling_days']).describe('month: the calendar month (UTC); rolling_days: the last `days` days'),
    days: z.number().int().min(1).max(366).nullable().default(null),
    blocking: z.boolean().default(true).describe('Once spent, calls it counts are answered 429 naming it'),
    alert_at: z.array(z.number().gt(0).max(1)).max(10).default([0.8]).describe('Fractions of the amount whose crossing notifies the organization\u2019s admins, once per period'),
  })
  .strict();
export type QuotaInput = z.output<typeof quotaInputSchema>;

export interface Quota extends QuotaInput {
  id: number;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

/** What one call is counted under: its organization, project, user and connection. */
export interface CallScope {
  orgId: number;
  projectId: number | null;
  userId: number | null;
  connectionId: number;
}

const DAY_MS = 86_400_000;

/** When the quota's current period began, and the key its alerts of that period are kept under. */
function periodOf(quota: Quota, now: Date): { since: string; key: string } {
  if (quota.period === 'month') {
    const start = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
    return { since: start.toISOString(), key: start.toISOString().slice(0, 7) };
  }
  const window = (quota.days ?? 30) * DAY_MS;
  // Alerts of a rolling quota are kept per block of `days` days: at most once a window per threshold.
  return { since: new Date(now.getTime() - window).toISOString(), key: `block-${Math.floor(now.getTime() / window)}` };
}

const spendScope = (quota: Quota): SpendScope => (quota.scope === 'organization' ? { column: null, id: null } : { column: `${quota.scope}_id` as SpendScope['column'], id: quota.scope_id });

const recordOf = (row: Record<string, any>): Quota => ({
  id: Number(row.id),
  scope: row.scope,
  scope_id: row.scope_id === null ? null : Number(row.scope_id),
  amount_usd: Number(row.amount_usd),
  period: row.period,
  days: row.days === null ? null : Number(row.days),
  blocking: Boolean(Number(row.blocking)),
  alert_at: JSON.parse(row.alert_at),
  created_by: row.created_by === null ? null : Number(row.created_by),
  created_at: row.created_at,
  updated_at: row.updated_at,
});

const notFound = (id: number) => problems.notFound(`no LLM quota ${id} in this organization`);

/** Cost quotas: kept per organization, checked before each call, their alerts sent once per period. */
export class Quotas {
  /** Each organization's quotas as calls check them, until a change of any: no database read per call for them. */
  private readonly byOrg: ChangeCountedCache<number, Quota[]>;

  constructor(
    private readonly storage: Storage,
    private readonly calls: CallLog,
    private readonly events: DomainEvents,
  ) {
    this.byOrg = new ChangeCountedCache(storage, LLM_MESH_COUNTER);
  }

  async create(orgId: number, input: QuotaInput, userId: number | null): Promise<Quota> {
    const now = this.storage.now();
    const row = await this.storage.db
      .insertInto('llm_mesh_quotas')
      .values({ org_id: orgId, ...input, blocking: input.blocking ? 1 : 0, alert_at: JSON.stringify(input.alert_at), created_by: userId, created_at: now, updated_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
    return recordOf(row);
  }

  async list(orgId: number): Promise<Quota[]> {
    return (await this.storage.db.selectFrom('llm_mesh_quotas').selectAll().where('org_id', '=', orgId).orderBy('id').execute()).map(recordOf);
  }

  async get(orgId: number, id: number): Promise<Quota> {
    const row = await this.storage.db.selectFrom('llm_mesh_quotas').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (!row) throw notFound(id);
    return recordOf(row);
  }

  async remove(orgId: number, id: number): Promise<void> {
    const deleted = await this.storage.db.deleteFrom('llm_mesh_quotas').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (Number(deleted.numDeletedRows) === 0) throw notFound(id);
  }

  /** A quota with what its period has spent so far. */
  async withSpending(orgId: number, quota: Quota) {
    const { since } = periodOf(quota, new Date());
    return { ...quota, period_start: since, spent_usd: roundUsd(await this.calls.spent(orgId, spendScope(quota), since)) };
  }

  /** The quotas that count a call: the organization's, and its project's, user's and connection's. */
  private async applying(scope: CallScope): Promise<Quota[]> {
    const all = await this.byOrg.get(scope.orgId, () => this.list(scope.orgId));
    return all.filter(
      (q) =>
        q.scope === 'organization' ||
        (q.scope === 'project' && q.scope_id === scope.projectId) ||
        (q.scope === 'user' && q.scope_id === scope.userId) ||
        (q.scope === 'connection' && q.scope_id === scope.connectionId),
    );
  }

  /** Refuses a call (429 naming the quota) when a blocking quota that counts it is spent; answers the quotas that count it (for `alert`). */
  async check(scope: CallScope): Promise<Quota[]> {
    const applying = await this.applying(scope);
    for (const quota of applying) {
      if (!quota.blocking) continue;
      const { since } = periodOf(quota, new Date());
      const spent = await this.calls.spent(scope.orgId, spendScope(quota), since);
      if (spent >= quota.amount_usd) {
        const retry = quota.period === 'month' ? Math.ceil((Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth() + 1, 1) - Date.now()) / 1000) : 3600;
        throw problems.tooManyRequests(`LLM quota ${quota.id} (${quota.scope}${quota.scope_id === null ? '' : ` ${quota.scope_id}`}, ${quota.amount_usd} USD per ${quota.period === 'month' ? 'month' : `${quota.days} days`}) is spent: ${roundUsd(spent)} USD since ${since}`, retry);
      }
    }
    return applying;
  }

  /** After a call that cost something: each threshold of the quotas counting it (`check`'s answer) crossed is published once per period (the alert row decides, on any instance). */
  async alert(scope: CallScope, applying: Quota[]): Promise<void> {
    for (const quota of applying) {
      if (!quota.alert_at.length) continue;
      const { since, key } = periodOf(quota, new Date());
      const spent = await this.calls.spent(scope.orgId, spendScope(quota), since);
      for (const threshold of quota.alert_at) {
        if (spent < quota.amount_usd * threshold) continue;
        await this.storage.transaction(async (trx) => {
          const inserted = await trx
            .insertInto('llm_mesh_quota_alerts')
            .values({ quota_id: quota.id, period_start: key, threshold, created_at: this.storage.now() })
            .onConflict((oc) => oc.doNothing())
            .executeTakeFirst();
          if (Number(inserted.numInsertedOrUpdatedRows ?? 0) === 0) return;
          const payload: QuotaAlertEvent = { quota_id: quota.id, scope: quota.scope, scope_id: quota.scope_id, amount_usd: quota.amount_usd, spent_usd: roundUsd(spent), threshold, period_start: since };
          await this.events.publish({ type: QUOTA_ALERT_EVENT, orgId: scope.orgId, payload }, trx);
        });
      }
    }
  }
}
