import { definePlugin } from '../../kernel/plugin-api.ts';
import { qualityRules } from '../data_quality_rules/public.ts';
import { stepType, stepTypes } from '../pipeline/public.ts';

type FailOn = 'error' | 'warn' | 'none';

/**
 * The step type `run_quality_rules`: runs every enabled data-quality rule of the datasets (as the
 * run's user, recorded in each rule's history) and fails by severity: `error` when a rule of
 * severity error did not pass, `warn` when any rule did not pass, `none` never.
 */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const rules = ctx.useService(qualityRules);
    ctx.contribute(
      stepTypes,
      stepType<{ datasets: number[]; fail_on?: FailOn }>({
        id: 'run_quality_rules',
        description: "Runs the datasets' data-quality rules; fails on a rule that did not pass, by severity (fail_on)",
        params: {
          type: 'object',
          properties: { datasets: { type: 'array', items: { type: 'integer', minimum: 1 }, minItems: 1, maxItems: 100 }, fail_on: { enum: ['error', 'warn', 'none'] } },
          required: ['datasets'],
          additionalProperties: false,
        },
        async run(context) {
          const failOn = context.params.fail_on ?? 'error';
          const results = [];
          for (const datasetId of context.params.datasets) {
            for (const rule of await rules.list(context.orgId, datasetId)) {
              if (!rule.enabled) continue;
              context.signal.throwIfAborted();
              const run = await rules.run(context.orgId, rule.id, context.principal, context.audit);
              results.push({ dataset_id: datasetId, rule_id: rule.id, rule: rule.name, severity: rule.severity, status: run.status });
            }
          }
          const failing = results.filter((r) => r.status !== 'passed' && (failOn === 'warn' || (failOn === 'error' && r.severity === 'error')));
          const output = { rules: results, failing: failing.length };
          if (!failing.length) return { status: 'succeeded', output };
          return { status: 'failed', output, error: `${failing.length} rule${failing.length === 1 ? '' : 's'} did not pass: ${failing.map((r) => `"${r.rule}" (${r.severity}, ${r.status})`).join(', ')}` };
        },
      }),
    );
  },
});
