import { definePlugin, defineRoute, identitySchemas as s, kernelServices, problems, reply, z, type Principal } from '../../kernel/plugin-api.ts';
import { datasetCatalog } from '../datasets/public.ts';
import { lineageConsumers } from '../lineage/public.ts';
import { BUILD_MODES, pipelineRuns, runAnswer } from '../pipeline/public.ts';
import { projectCatalog, projectDeleteGuards } from '../projects/public.ts';
import { scheduleTargets } from '../scheduler/public.ts';
import { JobStore, type Job, type JobFields } from './job-store.ts';
import { pipelineJobs } from './public.ts';

const jobInput = z.object({
  project_id: s.recordId,
  name: s.displayName,
  targets: z.array(s.recordId).min(1).max(100).describe('The datasets to build'),
  mode: z.enum(BUILD_MODES).default('build').describe('`build`: the recipes producing the targets; `build_required`: also every upstream recipe whose inputs changed since its last successful run; `force`: every upstream recipe'),
});

const jobSchema = z
  .object({ id: z.number().int(), project_id: z.number().int(), name: z.string(), targets: z.array(z.number().int()), mode: z.enum(BUILD_MODES), created_at: z.string(), updated_at: z.string() })
  .meta({ id: 'Job' });

const publicJob = ({ org_id: _org, created_by: _by, ...job }: Job) => job;
const base = { security: 'bearer', orgScoped: true } as const;
const idParams = s.idParam('id');

/** The `jobs` router: saved builds (spec: scheduled jobs), each run as a build of the pipeline (`pipeline.runs`). */
export default definePlugin({
  deps: { storage: kernelServices.storage },
  migrations: {
    '2026-11-25T1100_jobs': {
      async up({ db, storage }) {
        await storage
          .addIdColumn(db.schema.createTable('jobs'))
          .addColumn('org_id', 'integer', (c) => c.notNull().references('organizations.id').onDelete('cascade'))
          .addColumn('project_id', 'integer', (c) => c.notNull())
          .addColumn('name', 'text', (c) => c.notNull())
          .addColumn('targets', storage.types.json, (c) => c.notNull())
          .addColumn('mode', 'text', (c) => c.notNull())
          .addColumn('created_by', 'integer')
          .addColumn('created_at', storage.types.timestamp, (c) => c.notNull())
          .addColumn('updated_at', storage.types.timestamp, (c) => c.notNull())
          .addUniqueConstraint('jobs_name', ['org_id', 'project_id', 'name'])
          .execute();
      },
      async down({ db }) {
        await db.schema.dropTable('jobs').execute();
      },
    },
  },
  init: ({ storage }, ctx) => {
    const jobs = new JobStore(storage);
    ctx.provideService(pipelineJobs, {
      find: async (orgId, id) => {
        const job = await jobs.find(orgId, id);
        return job ? { id: job.id, project_id: job.project_id, name: job.name, targets: job.targets, mode: job.mode } : null;
      },
    });
    const runs = ctx.useService(pipelineRuns);
    const catalog = ctx.useService(datasetCatalog);
    const projects = ctx.useService(projectCatalog);
    // A job builds its targets: changing their columns (or those they are computed from) touches it.
    ctx.contribute(lineageConsumers, async (orgId, datasets) => {
      const all = await jobs.list(orgId);
      return datasets.flatMap(({ dataset_id, columns }) => all.filter((job) => job.targets.includes(dataset_id)).map((job) => ({ kind: 'job', id: job.id, name: job.name, dataset_id, columns })));
    });
    // A schedule's fire runs the job as a build started by the schedule, as the schedule's owner.
    ctx.contribute(scheduleTargets, {
      field: 'job_id',
      find: async (orgId, id) => (await jobs.find(orgId, id)) ?? null,
      async fire(orgId, id, principal, scheduleId, fireKey) {
        // As POST …/{id}/run asks of its caller: the schedule's owner must still be allowed to run jobs.
        if (!principal.capabilities.has('pipeline.run')) throw problems.forbidden('running a job needs the capability "pipeline.run"');
        const job = await jobs.get(orgId, id);
        const run = await runs.build(orgId, { project_id: job.project_id, targets: job.targets, mode: job.mode, trigger: 'schedule', job_id: job.id, schedule_id: scheduleId, idempotency_key: fireKey }, principal);
        return { run_id: run.id };
      },
    });
    ctx.contribute(projectDeleteGuards, async (orgId, projectId) => {
      const count = await jobs.countInProject(orgId, projectId);
      return count ? `it holds ${count} job${count === 1 ? '' : 's'}; delete them first` : null;
    });

    /** The project exists and every target is a dataset of this organization; each problem a 422 naming the field. */
    async function check(orgId: number, fields: JobFields): Promise<void> {
      if (!(await projects.exists(orgId, fields.project_id))) throw problems.unprocessable(`project ${fields.project_id} does not exist in this organization`, [{ path: 'body.project_id', message: 'no such project' }]);
      for (const [i, id] of fields.targets.entries()) {
        await Promise.resolve(catalog.get(orgId, id)).catch(() => {
          throw problems.unprocessable(`dataset ${id} does not exist in this organization`, [{ path: `body.targets.${i}`, message: 'no such dataset' }]);
        });
      }
    }
    const userOf = (principal: Principal) => ('userId' in principal ? principal.userId : null);

    return {
      routes: [
        defineRoute({
          ...base,
          method: 'post',
          path: '',
          summary: 'Create a job',
          description: 'A job is a saved build: the target datasets and how much upstream to rebuild (`mode`).',
          capability: 'pipeline.write',
          request: { body: jobInput },
          responses: { 201: { description: 'Created', schema: jobSchema }, 409: { description: 'A job of that name exists in the project' }, 422: { description: 'A project or target dataset that does not exist here' } },
          handler: async ({ body, orgId, principal, audit }) => {
            await check(orgId, body);
            const job = await jobs.create(orgId, body, userOf(principal));
            await audit.record({ action: 'pipeline.job.create', targetType: 'job', targetId: job.id, details: { name: job.name } });
            return reply(201, publicJob(job));
          },
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '',
          summary: 'List jobs',
          description: 'The jobs of this organization, of one project with `project_id`.',
          capability: 'pipeline.read',
          request: { query: z.object({ project_id: s.pathId.optional() }) },
          responses: { 200: { description: 'Jobs', schema: z.object({ items: z.array(jobSchema) }) } },
          handler: async ({ query, orgId }) => ({ items: (await jobs.list(orgId, query.project_id)).map(publicJob) }),
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/{id}',
          summary: 'Get a job',
          description: 'One job of this organization.',
          capability: 'pipeline.read',
          request: { params: idParams },
          responses: { 200: { description: 'The job', schema: jobSchema } },
          handler: async ({ params, orgId }) => publicJob(await jobs.get(orgId, params.id)),
        }),
        defineRoute({
          ...base,
          method: 'patch',
          path: '/{id}',
          summary: 'Change a job',
          description: 'Changes the name, targets or mode (its project stays).',
          capability: 'pipeline.write',
          request: { params: idParams, body: jobInput.omit({ project_id: true }).partial() },
          responses: { 200: { description: 'The job', schema: jobSchema }, 409: { description: 'A job of that name exists in the project' }, 422: { description: 'A target dataset that does not exist here' } },
          handler: async ({ params, body, orgId, audit }) => {
            const current = await jobs.get(orgId, params.id);
            const fields = { project_id: current.project_id, name: body.name ?? current.name, targets: body.targets ?? current.targets, mode: body.mode ?? current.mode };
            await check(orgId, fields);
            const job = await jobs.update(orgId, params.id, fields);
            await audit.record({ action: 'pipeline.job.update', targetType: 'job', targetId: job.id, details: { changes: Object.keys(body) } });
            return publicJob(job);
          },
        }),
        defineRoute({
          ...base,
          method: 'delete',
          path: '/{id}',
          summary: 'Delete a job',
          description: 'Deletes the job; its past runs stay.',
          capability: 'pipeline.write',
          request: { params: idParams },
          responses: { 204: { description: 'Deleted' } },
          handler: async ({ params, orgId, audit }) => {
            const job = await jobs.remove(orgId, params.id);
            await audit.record({ action: 'pipeline.job.delete', targetType: 'job', targetId: job.id, details: { name: job.name } });
            return reply(204);
          },
        }),
        defineRoute({
          ...base,
          method: 'post',
          path: '/{id}/run',
          summary: 'Run a job',
          description: "Queues a build of the job's targets: a run of kind `job` with one child run per recipe (GET /api/pipeline/runs?parent_run_id=…). Independent branches run in parallel; the recipes downstream of a failed one end `skipped`.",
          capability: 'pipeline.run',
          request: { params: idParams },
          responses: { 202: { description: 'Queued', schema: runAnswer } },
          handler: async ({ params, orgId, principal, audit }) => {
            const job = await jobs.get(orgId, params.id);
            const run = await runs.build(orgId, { project_id: job.project_id, targets: job.targets, mode: job.mode, trigger: principal.kind === 'user' ? 'manual' : 'api', job_id: job.id }, principal);
            await audit.record({ action: 'pipeline.job.run', targetType: 'job', targetId: job.id, details: { run_id: run.id } });
            return reply(202, { run: await runs.get(orgId, run.id) });
          },
        }),
      ],
    };
  },
});
