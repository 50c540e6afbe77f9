/**
 * The data-quality plugin's public contract: rules created and run by other plugins (a dbt
 * import's generic tests, a scenario's `run_quality_rules` step), with the checks and answers of
 * the /api/data-quality routes.
 */
import { pluginServiceRef, type Principal, type RequestAudit } from '../../kernel/plugin-api.ts';
import type { Rule, Run } from './rule-store.ts';
import type { RULE_TYPES } from './rule-types.ts';

export { RULE_TYPES } from './rule-types.ts';

/** A rule as GET /api/data-quality/rules/{id} answers it. */
export type QualityRule = Rule;

/** A run of a rule as POST /api/data-quality/rules/{id}/run answers it: `status` passed, failed or error; `severity` the rule's. */
export type QualityRuleRun = Run & { details_withheld: false };

/**
 * What POST /api/data-quality/rules takes: `params` per `type` (not_null/unique {column}; range
 * {column, min?, max?}; pattern {column, pattern}; allowed_values {column, values};
 * row_count_between {min?, max?}; freshness {column?, max_age_hours}; custom_sql {condition});
 * `severity` defaults to `error`, `enabled` to true.
 */
export interface QualityRuleInput {
  dataset_id: number;
  name: string;
  type: (typeof RULE_TYPES)[number];
  params: Record<string, unknown>;
  severity?: 'warn' | 'error';
  enabled?: boolean;
}

export interface QualityRules {
  /**
   * Creates a rule as POST /api/data-quality/rules does, with its checks and problems (fields named
   * under `body`): 400 for a bad name or parameters, 404 for a dataset not in the organization, 422
   * for a missing or ill-typed column, 403 for a rule on a PII column without `datasets.pii.read`,
   * 400 for a condition or pattern the database cannot run. Audited through `audit`.
   */
  create(orgId: number, principal: Principal, input: QualityRuleInput, audit: RequestAudit): Promise<QualityRule>;
  /** The rules of a dataset of the organization (enabled or not), oldest first. */
  list(orgId: number, datasetId: number): Promise<QualityRule[]>;
  /**
   * Runs one rule as POST /api/data-quality/rules/{id}/run does: evaluated in the caller's data
   * scope, recorded in the rule's history, answered in full; 404 for a rule not in the organization.
   */
  run(orgId: number, ruleId: number, principal: Principal, audit: RequestAudit): Promise<QualityRuleRun>;
  /** Deletes a rule and its history as DELETE /api/data-quality/rules/{id} does (404 for a rule not in the organization); audited through `audit`. */
  remove(orgId: number, ruleId: number, audit: RequestAudit): Promise<void>;
}

export const qualityRules = pluginServiceRef<QualityRules>('data_quality_rules.rules');

/**
 * The durable event published with the run of a rule of severity `error` that failed (its rows
 * broke it), in the run's transaction. `run_by`: the user the run was for (the caller, or the user
 * a scenario's run acts for).
 */
export const QUALITY_RULE_FAILED = 'quality.rule.failed';
export interface QualityRuleFailedEvent {
  rule_id: number;
  rule: string;
  dataset_id: number;
  dataset: string;
  run_id: number;
  failing_rows: number;
  message: string;
  run_by: number | null;
}
