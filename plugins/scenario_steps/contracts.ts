import { definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { datasetCatalog, datasetContracts, SCHEMA_DRIFT_DETECTED, type DriftChange, type SchemaDriftDetectedEvent } from '../datasets/public.ts';
import { lineageService } from '../lineage/public.ts';
import { stepType, stepTypes } from '../pipeline/public.ts';

type FailOn = 'breaking' | 'any' | 'none';

const datasetsParam = { type: 'array', items: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER }, minItems: 1, maxItems: 100 };

/**
 * The step types `check_schema_drift` (each dataset's live schema against its current contract,
 * with what each breaking change touches downstream) and `capture_contract` (the live schemas as
 * the new contracts).
 */
export default definePlugin({
  deps: { events: kernelServices.events },
  init: ({ events }, ctx) => {
    const contracts = ctx.useService(datasetContracts);
    const catalog = ctx.useService(datasetCatalog);
    const lineage = ctx.useService(lineageService);

    /** Each change, a breaking one with what it touches downstream: datasets and columns, recipes on the way, consumers. */
    const withImpact = (orgId: number, datasetId: number, changes: DriftChange[]) =>
      Promise.all(
        changes.map(async (change) => {
          if (change.severity !== 'breaking') return { ...change, impact: null };
          const { datasets, recipes, consumers } = await lineage.impact(orgId, datasetId, [change.column]);
          return { ...change, impact: { datasets, recipes, consumers } };
        }),
      );

    ctx.contribute(
      stepTypes,
      stepType<{ datasets: number[]; fail_on?: FailOn; require_contract?: boolean }>({
        id: 'check_schema_drift',
        description:
          "Reads each dataset's drift from its current contract: fail_on breaking (a column removed or retyped), any (also one added) or none (records only); a dataset without a contract fails only with require_contract. Lists each change and, for a breaking one, the downstream datasets, columns and consumers it affects",
        params: {
          type: 'object',
          properties: { datasets: datasetsParam, fail_on: { enum: ['breaking', 'any', 'none'] }, require_contract: { type: 'boolean' } },
          required: ['datasets'],
          additionalProperties: false,
        },
        async run(context) {
          const failOn = context.params.fail_on ?? 'breaking';
          const drift = [];
          const failing: string[] = [];
          for (const datasetId of context.params.datasets) {
            const dataset = await catalog.get(context.orgId, datasetId);
            const found = await contracts.drift(context.orgId, datasetId);
            const changes = await withImpact(context.orgId, datasetId, found.changes);
            drift.push({ dataset_id: datasetId, dataset: dataset.name, status: found.status, contract_version: found.contract_version, changes });
            if (found.status === 'breaking' || found.status === 'additive') {
              const payload: SchemaDriftDetectedEvent = { dataset_id: datasetId, dataset: dataset.name, status: found.status, contract_version: found.contract_version, changes, run_id: context.run.id, scenario_id: context.run.scenario_id, step: context.step.position, created_by: context.principal.onBehalfOf.userId };
              await events.publish({ type: SCHEMA_DRIFT_DETECTED, orgId: context.orgId, payload });
            }
            const fails = found.status === 'no-contract' ? context.params.require_contract === true : found.status === 'breaking' ? failOn !== 'none' : found.status === 'additive' && failOn === 'any';
            if (fails) failing.push(`"${dataset.name}" (${found.status === 'no-contract' ? 'no contract' : `${found.status}: ${found.changes.map((c) => `${c.column} ${c.change}`).join(', ')}`})`);
          }
          const output = { drift, failing: failing.length };
          if (!failing.length) return { status: 'succeeded', output };
          return { status: 'failed', output, error: `schema drift in ${failing.join('; ')}` };
        },
      }),
    );
    ctx.contribute(
      stepTypes,
      stepType<{ datasets: number[] }>({
        id: 'capture_contract',
        description: "Captures each dataset's live schema as its new current contract (the previous one stays in its history)",
        params: { type: 'object', properties: { datasets: datasetsParam }, required: ['datasets'], additionalProperties: false },
        async run(context) {
          const captured = [];
          for (const datasetId of context.params.datasets) {
            const contract = await contracts.capture(context.orgId, datasetId, context.principal.onBehalfOf.userId);
            captured.push({ dataset_id: datasetId, version: contract.version, columns: contract.columns.length });
          }
          return { status: 'succeeded', output: { contracts: captured } };
        },
      }),
    );
  },
});
