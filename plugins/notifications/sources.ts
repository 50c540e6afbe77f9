import type { PlatformEvent, SecurityEventPayload } from '../../kernel/plugin-api.ts';
import type { DashboardPublishedEvent } from '../dashboards/public.ts';
import type { QualityRuleFailedEvent } from '../data_quality_rules/public.ts';
import type { SchemaDriftDetectedEvent } from '../datasets/public.ts';
import type { QuotaAlertEvent } from '../llm_mesh/public.ts';
import type { RunFinishedEvent } from '../pipeline/public.ts';
import type { NewNotification } from './notification-store.ts';

/** The domain events notifications are made of. */
export const SOURCE_EVENTS = ['run.finished', 'schema.drift.detected', 'quality.rule.failed', 'audit.security_event', 'dashboard.published', 'llm_mesh.quota.alert'];

/**
 * The notifications one domain event makes (none for most: a run that succeeded, a drift that is
 * only additive); `admins` answers who administers an organization, for events told to them.
 */
export async function notificationsOf(event: PlatformEvent, admins: (orgId: number) => Promise<number[]>): Promise<NewNotification[]> {
  const orgId = event.org_id;
  switch (event.type) {
    case 'run.finished': {
      const run = event.payload as RunFinishedEvent;
      // A build's own runs fail with it: its starter hears of the build.
      if (run.status !== 'failed' || run.created_by === null || run.parent_run_id !== null) return [];
      const scenario = run.kind === 'scenario';
      return [
        {
          user_id: run.created_by,
          org_id: orgId,
          type: scenario ? 'scenario.failed' : 'run.failed',
          title: scenario ? `Scenario run ${run.run_id} failed` : `${run.kind[0].toUpperCase()}${run.kind.slice(1)} run ${run.run_id} failed`,
          body: run.error ? `${run.error.title}: ${run.error.detail}` : 'The run failed.',
          link: `/api/pipeline/runs/${run.run_id}`,
          source_key: `run:${run.run_id}`,
        },
      ];
    }
    case 'schema.drift.detected': {
      const drift = event.payload as SchemaDriftDetectedEvent;
      if (drift.status !== 'breaking') return [];
      const changes = drift.changes.filter((c) => c.severity === 'breaking').map((c) => `${c.column} ${c.change}`);
      return [{ user_id: drift.created_by, org_id: orgId, type: 'schema.drift.breaking', title: `Breaking schema drift in ${drift.dataset}`, body: `Scenario run ${drift.run_id} found: ${changes.join(', ')}.`, link: `/api/datasets/${drift.dataset_id}/drift`, source_key: `drift:${drift.run_id}:${drift.dataset_id}` }];
    }
    case 'quality.rule.failed': {
      const failed = event.payload as QualityRuleFailedEvent;
      if (failed.run_by === null) return [];
      return [{ user_id: failed.run_by, org_id: orgId, type: 'quality.rule.failed', title: `Data-quality rule "${failed.rule}" failed on ${failed.dataset}`, body: failed.message, link: `/api/data-quality/rules/${failed.rule_id}/runs`, source_key: `quality:${failed.run_id}` }];
    }
    case 'audit.security_event': {
      const audit = event.payload as SecurityEventPayload;
      const owner = Number(audit.details.owner_id);
      // A token revoked by an administrator: its owner hears of it (one revoking their own token does not).
      if (audit.action !== 'token.revoke' || audit.details.by_org_admin !== true || !Number.isSafeInteger(owner) || owner === audit.actor_user_id) return [];
      return [{ user_id: owner, org_id: orgId, type: 'token.revoked', title: `Your token "${String(audit.details.token_name ?? audit.target_id)}" was revoked by an administrator`, body: `${audit.actor_username ?? 'An administrator'} revoked it at ${audit.at}. Requests with it are refused from now on.`, link: '/api/auth/tokens', source_key: `token-revoked:${audit.target_id}` }];
    }
    case 'dashboard.published': {
      const published = event.payload as DashboardPublishedEvent;
      if (published.created_by === null) return [];
      return [{ user_id: published.created_by, org_id: orgId, type: 'dashboard.published', title: `Dashboard "${published.name}" was published`, body: `A share link was made; it expires at ${published.expires_at}.`, link: `/api/dashboards/${published.dashboard_id}/publish`, source_key: `dashboard-link:${published.link_id}` }];
    }
    case 'llm_mesh.quota.alert': {
      const alert = event.payload as QuotaAlertEvent;
      if (orgId === null) return [];
      const share = Math.round(alert.threshold * 100);
      const scope = alert.scope === 'organization' ? 'the organization' : `${alert.scope} ${alert.scope_id}`;
      return (await admins(orgId)).map((userId) => ({
        user_id: userId,
        org_id: orgId,
        type: 'llm.quota.alert',
        title: `LLM quota ${alert.quota_id} has reached ${share}% of ${alert.amount_usd} USD`,
        body: `Calls of ${scope} have cost ${alert.spent_usd} USD since ${alert.period_start}.`,
        link: '/api/llm-mesh/quotas',
        source_key: `llm-quota:${alert.quota_id}:${alert.period_start}:${alert.threshold}`,
      }));
    }
    default:
      return [];
  }
}
