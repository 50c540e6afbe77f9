/**
 * The scheduler plugin's public contract: how a plugin contributes a kind of schedule target (a
 * job, a scenario). The scheduler knows targets only through these contributions.
 */
import { z } from 'zod';
import { defineExtensionPoint, type Principal } from '../../kernel/plugin-api.ts';

export interface ScheduleTarget {
  /** The field of a schedule's `target` naming one: 'job_id' or 'scenario_id'. */
  field: string;
  /** The target in the organization, or null when it does not exist (any more). */
  find(orgId: number, id: number): Promise<{ project_id: number; name: string } | null>;
  /**
   * Starts a run of the target for a schedule's fire (trigger "schedule"), acting as `principal`;
   * answers the run's id. `fireKey` names the fire: a fire whose instance died is finished by
   * calling again with the same key, so start at most one run per key and answer that run again
   * (the pipeline's runs take it as their `idempotency_key`).
   */
  fire(orgId: number, id: number, principal: Principal, scheduleId: number, fireKey: string): Promise<{ run_id: number }>;
}

const fn = z.custom<(...args: never[]) => unknown>((value) => typeof value === 'function', 'must be a function');

/**
 * The kinds of schedule target, one per `field` (a second plugin contributing the same field fails
 * to load). A schedule's `target` names exactly one contributed field.
 */
export const scheduleTargets = defineExtensionPoint<ScheduleTarget>({
  id: 'scheduler.targets',
  key: (target) => target.field,
  schema: z
    .object({
      field: z.string().regex(/^[a-z][a-z0-9_]{0,62}$/, 'must be lower-case letters, digits and underscores, such as job_id'),
      find: fn,
      fire: fn,
    })
    .strict(),
});
