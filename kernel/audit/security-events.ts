/**
 * The durable event published with an audit row recorded as a security event (`security: true`:
 * sign-in failures, password changes and resets, users, tokens and API keys, groups and their
 * members, organization members, cross-organization access, row policies, PII flags, plugin
 * switches), in the transaction of that row: for what watches an organization's security from
 * outside (webhooks).
 */
export const SECURITY_EVENT = 'audit.security_event';

/** What `audit.security_event` carries: the audit row, its details scrubbed of secrets as the row's are. */
export interface SecurityEventPayload {
  audit_id: number;
  action: string;
  outcome: string;
  actor_kind: string | null;
  actor_user_id: number | null;
  actor_username: string | null;
  target_type: string | null;
  target_id: string | null;
  ip: string | null;
  at: string;
  details: Record<string, unknown>;
}
