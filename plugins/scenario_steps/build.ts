import { definePlugin } from '../../kernel/plugin-api.ts';
import { pipelineJobs } from '../jobs/public.ts';
import { BUILD_MODES, pipelineRuns, stepType, stepTypes, type BuildMode } from '../pipeline/public.ts';
import { untilChildEnds } from './child-run.ts';

const datasetId = { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER };

/**
 * The step types `build` (targets and a mode, as a job takes them) and `run_job` (a saved job):
 * each starts a build as a child run of the scenario run (trigger `scenario`) and ends as it does.
 */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const runs = ctx.useService(pipelineRuns);
    const jobs = ctx.useService(pipelineJobs);
    ctx.contribute(
      stepTypes,
      stepType<{ targets: number[]; mode?: BuildMode }>({
        id: 'build',
        description: 'Builds the target datasets (a child run of kind job); fails when the build fails',
        params: { type: 'object', properties: { targets: { type: 'array', items: datasetId, minItems: 1, maxItems: 100 }, mode: { enum: [...BUILD_MODES] } }, required: ['targets'], additionalProperties: false },
        run: (context) =>
          untilChildEnds(context, () =>
            runs.build(context.orgId, { project_id: context.run.project_id, targets: context.params.targets, mode: context.params.mode ?? 'build', trigger: 'scenario', parent_run_id: context.run.id }, context.principal),
          ),
      }),
    );
    ctx.contribute(
      stepTypes,
      stepType<{ job_id: number }>({
        id: 'run_job',
        description: "Runs a saved job's build (a child run); fails when the build fails",
        params: { type: 'object', properties: { job_id: datasetId }, required: ['job_id'], additionalProperties: false },
        run: (context) =>
          untilChildEnds(context, async () => {
            const job = await jobs.find(context.orgId, context.params.job_id);
            if (!job) throw new Error(`no job ${context.params.job_id} in this organization`);
            return runs.build(context.orgId, { project_id: job.project_id, targets: job.targets, mode: job.mode, trigger: 'scenario', job_id: job.id, parent_run_id: context.run.id }, context.principal);
          }),
      }),
    );
  },
});
