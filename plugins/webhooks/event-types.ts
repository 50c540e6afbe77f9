import type { PlatformEvent } from '../../kernel/plugin-api.ts';
import type { SchemaDriftDetectedEvent } from '../datasets/public.ts';
import type { RunFinishedEvent } from '../pipeline/public.ts';

/** The event types a subscription may name, and what each reports. */
export const WEBHOOK_EVENT_TYPES: Record<string, string> = {
  'dataset.updated': 'A dataset\u2019s rows changed: an upload, an append, a recipe\u2019s output swapped in',
  'run.finished': 'A run ended: succeeded, failed or cancelled (a recipe\u2019s, a build\u2019s, a job\u2019s, a scenario\u2019s, a training\u2019s; skipped runs, which never ran, are not sent)',
  'recipe.run.failed': 'A recipe\u2019s run failed',
  'scenario.failed': 'A scenario\u2019s run failed',
  'schema.drift.detected': 'A scenario\u2019s check_schema_drift step found a dataset\u2019s schema drifted from its contract (additive or breaking), with each change\u2019s impact',
  'dashboard.published': 'A dashboard was published as a share link',
  'api_service.published': 'An API Service was published',
  'audit.security_event': 'An audit row recorded as a security event: a failed sign-in, a password changed or reset, a user created, changed or deactivated, a token or data API key minted or revoked, a group created or deleted, a member added to or removed from a group or the organization, a platform admin entering the organization, a row policy created or deleted, a PII flag removed, a plugin switched for the organization',
  ping: 'Sent by POST /api/webhooks/{id}/ping only',
};

/** The domain events the webhooks plugin subscribes to. */
export const SOURCE_EVENT_TYPES = ['dataset.updated', 'run.finished', 'schema.drift.detected', 'dashboard.published', 'api_service.published', 'audit.security_event'];

/** The webhook events one domain event becomes: a failed recipe run is `run.finished` and `recipe.run.failed`. */
export function webhookEventsOf(event: PlatformEvent): string[] {
  if (event.type !== 'run.finished') return [event.type];
  const run = event.payload as RunFinishedEvent;
  if (run.status === 'skipped') return [];
  const types = ['run.finished'];
  if (run.status === 'failed' && run.kind === 'recipe') types.push('recipe.run.failed');
  if (run.status === 'failed' && run.kind === 'scenario') types.push('scenario.failed');
  return types;
}

/**
 * The stable id of a webhook event: receivers de-duplicate by it. Mostly the domain event's own id;
 * a drift found by a step is the same finding when the step runs again after a restart (a new
 * domain event), so its id is the run, step and dataset.
 */
export function webhookEventId(event: PlatformEvent, type: string): string {
  if (event.type === 'schema.drift.detected') {
    const drift = event.payload as SchemaDriftDetectedEvent;
    return `evt_drift_${drift.run_id}_${drift.step}_${drift.dataset_id}`;
  }
  return `evt_${event.id}_${type}`;
}
