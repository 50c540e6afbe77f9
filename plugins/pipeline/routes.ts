import { defineRoute, identitySchemas as s, problems, reply, z } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog } from '../datasets/public.ts';
import type { ProjectCatalog } from '../projects/public.ts';
import { runAnswer, runSchema, RUN_KINDS, RUN_STATUSES, RUN_TRIGGERS, type PipelineRecipes, type RunStatus, type RunTrigger } from './public.ts';
import type { RecipeChecks } from './recipe-checks.ts';
import type { RecipeStore } from './recipe-store.ts';
import { publicRecipe } from './recipe-service.ts';
import type { PipelineRunner } from './runs.ts';
import type { RunStore } from './run-store.ts';
import { flowOf } from './flows.ts';
import { scenarioStepRunSchema } from './scenario-schemas.ts';
import type { ScenarioStore } from './scenario-store.ts';
import { flowSchema, isoInstant, newRecipeInput, recipeInput, recipeOutputsSchema, recipeSchema } from './schemas.ts';

export interface PipelineRouteDeps {
  recipes: RecipeStore;
  /** Recipes written with their checks (the `pipeline.recipes` service). */
  recipeWrites: PipelineRecipes;
  checks: RecipeChecks;
  runner: PipelineRunner;
  runs: RunStore;
  catalog: DatasetCatalog;
  projects: ProjectCatalog;
  scenarios: ScenarioStore;
}

const base = { security: 'bearer', orgScoped: true } as const;
const idParams = s.idParam('id');

/** A comma-separated list of values from `allowed`; another is a 400 naming the query field. */
const listOf = <T extends string>(allowed: readonly T[], field: string) =>
  z
    .string()
    .max(200)
    .transform((text, ctx) => {
      const values = text.split(',').map((v) => v.trim());
      const wrong = values.find((v) => !allowed.includes(v as T));
      if (wrong !== undefined) {
        ctx.addIssue({ code: 'custom', message: `unknown ${field} "${wrong}" (use ${allowed.join(', ')})` });
        return z.NEVER;
      }
      return values as T[];
    });

const runsQuery = z.object({
  status: listOf(RUN_STATUSES, 'status').optional().meta({ description: 'One or several statuses, comma-separated', example: 'failed,cancelled' }),
  kind: z.string().regex(/^[a-z][a-z0-9_]*$/).max(100).optional().meta({ description: `${RUN_KINDS.join(', ')}, or a contributed kind (training)` }),
  trigger: z.enum(RUN_TRIGGERS as [RunTrigger, ...RunTrigger[]]).optional(),
  project_id: s.pathId.optional(),
  job_id: s.pathId.optional(),
  recipe_id: s.pathId.optional(),
  parent_run_id: s.pathId.optional().meta({ description: "A build's runs: its children" }),
  schedule_id: s.pathId.optional().meta({ description: 'Runs started by this schedule' }),
  scenario_id: s.pathId.optional().meta({ description: "A scenario's runs" }),
  since: isoInstant.optional().meta({ description: 'Runs created at or after this ISO-8601 instant', example: '2026-11-25T00:00:00Z' }),
  until: isoInstant.optional().meta({ description: 'Runs created before this ISO-8601 instant', example: '2026-11-26T00:00:00Z' }),
  limit: z.coerce.number().int().min(1).max(500).default(50),
  cursor: z.string().max(200).optional().meta({ description: 'The `next_cursor` of the previous page' }),
});

/** A run as GET /runs/{id} answers it: a scenario's with its steps. */
const runWithSteps = runSchema.extend({ steps: z.array(scenarioStepRunSchema).optional().describe("A scenario run's steps, in order, each with its outcome") }).meta({ id: 'PipelineRunDetail' });

export function pipelineRoutes({ recipes, recipeWrites, checks, runner, runs, catalog, projects, scenarios }: PipelineRouteDeps) {
  return [
    defineRoute({
      ...base,
      method: 'post',
      path: '/recipes',
      summary: 'Create a recipe',
      description:
        'A recipe reads input datasets and writes output datasets with a recipe type (GET /api/plugins/recipe-types). Checked before it is saved: the datasets exist in this organization, the outputs in the recipe\u2019s project and written by no other recipe, no cycle, params valid against the type\u2019s JSON Schema and naming existing columns.',
      capability: 'pipeline.write',
      request: { body: newRecipeInput },
      responses: {
        201: { description: 'Created', schema: recipeSchema },
        409: { description: 'The name is taken in the project, an output is written by another recipe, or the recipe would close a cycle (named)' },
        422: { description: 'A dataset, project or recipe type that does not exist here, or inputs and outputs the type does not take' },
      },
      handler: async ({ body, orgId, principal, audit }) => {
        const recipe = await recipeWrites.create(orgId, body, principal);
        await audit.record({ action: 'pipeline.recipe.create', targetType: 'recipe', targetId: recipe.id, details: { name: recipe.name, type: recipe.type } });
        return reply(201, recipe);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/recipes',
      summary: 'List recipes',
      description: 'The recipes of this organization, of one project with `project_id`.',
      capability: 'pipeline.read',
      request: { query: z.object({ project_id: s.pathId.optional() }) },
      responses: { 200: { description: 'Recipes', schema: z.object({ items: z.array(recipeSchema) }) } },
      handler: async ({ query, orgId }) => ({ items: await recipeWrites.list(orgId, { project_id: query.project_id }) }),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/recipes/{id}',
      summary: 'Get a recipe',
      description: 'One recipe of this organization.',
      capability: 'pipeline.read',
      request: { params: idParams },
      responses: { 200: { description: 'The recipe', schema: recipeSchema } },
      handler: async ({ params, orgId }) => recipeWrites.get(orgId, params.id),
    }),
    defineRoute({
      ...base,
      method: 'patch',
      path: '/recipes/{id}',
      summary: 'Change a recipe',
      description: 'Changes the name, type, inputs, outputs or params (its project stays), checked as at creation.',
      capability: 'pipeline.write',
      request: { params: idParams, body: recipeInput.omit({ project_id: true }).partial() },
      responses: {
        200: { description: 'The recipe', schema: recipeSchema },
        409: { description: 'The name is taken, an output is written by another recipe, or the change would close a cycle (named)' },
        422: { description: 'A dataset or recipe type that does not exist here, or inputs and outputs the type does not take' },
      },
      handler: async ({ params, body, orgId, principal, audit }) => {
        const recipe = await recipeWrites.update(orgId, params.id, body, principal);
        await audit.record({ action: 'pipeline.recipe.update', targetType: 'recipe', targetId: recipe.id, details: { changes: Object.keys(body) } });
        return recipe;
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/recipes/{id}',
      summary: 'Delete a recipe',
      description: 'Deletes the recipe; its datasets and past runs stay.',
      capability: 'pipeline.write',
      request: { params: idParams },
      responses: { 204: { description: 'Deleted' } },
      handler: async ({ params, orgId, audit }) => {
        const recipe = await recipeWrites.remove(orgId, params.id);
        await audit.record({ action: 'pipeline.recipe.delete', targetType: 'recipe', targetId: recipe.id, details: { name: recipe.name } });
        return reply(204);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/recipes/{id}/schema',
      summary: 'The columns a recipe would write',
      description: "Each output's columns as the recipe would write them now, planned from its definition without running it (a handler type's are known once it ran: the output's columns as they are).",
      capability: 'pipeline.read',
      request: { params: idParams },
      responses: { 200: { description: 'The output columns', schema: recipeOutputsSchema }, 422: { description: 'The recipe no longer fits its inputs (a column it names is gone) or its type is not offered here' } },
      handler: async ({ params, orgId, principal }) => ({ outputs: await checks.outputColumns(await recipes.get(orgId, params.id), principal) }),
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/recipes/{id}/run',
      summary: 'Run a recipe',
      description: 'Queues a run of the recipe (background work: any instance runs it). Poll GET /api/pipeline/runs/{id}; its outputs are swapped in all at once when it succeeds.',
      capability: 'pipeline.run',
      request: { params: idParams },
      responses: { 202: { description: 'Queued', schema: runAnswer } },
      handler: async ({ params, orgId, principal, audit }) => {
        const run = await runner.runRecipe(orgId, params.id, principal, principal.kind === 'user' ? 'manual' : 'api');
        await audit.record({ action: 'pipeline.recipe.run', targetType: 'recipe', targetId: params.id, details: { run_id: run.id } });
        return reply(202, { run: await runner.get(orgId, run.id) });
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/runs',
      summary: 'List runs',
      description: 'Runs of recipes and builds, newest first, a page at a time (`next_cursor`). Filters combine; `status` takes several values comma-separated.',
      capability: 'pipeline.read',
      request: { query: runsQuery },
      responses: { 200: { description: 'A page of runs', schema: z.object({ items: z.array(runSchema), next_cursor: z.string().nullable() }).meta({ id: 'PipelineRunPage' }) } },
      handler: async ({ query, orgId }) => runner.list(orgId, { ...query, status: query.status as RunStatus[] | undefined }),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/runs/{id}',
      summary: 'Get a run',
      description: "One run: its status, timing, rows written and error; a scenario's run with each step's status, timing, output and error.",
      capability: 'pipeline.read',
      request: { params: idParams },
      responses: { 200: { description: 'The run', schema: runWithSteps } },
      handler: async ({ params, orgId }) => {
        const run = await runner.get(orgId, params.id);
        if (run.kind !== 'scenario') return run;
        const steps = (await scenarios.runSteps(run.id)).map(({ position, name, type, status, started_at, ended_at, output, error }) => ({ position, name, type, status, started_at, ended_at, output, error }));
        return { ...run, steps };
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/runs/{id}/logs',
      summary: "A run's log",
      description: 'What the run did, line by line, oldest first.',
      capability: 'pipeline.read',
      request: { params: idParams },
      responses: { 200: { description: 'Log lines', schema: z.object({ items: z.array(z.object({ ts: z.string(), level: z.enum(['info', 'warn', 'error']), message: z.string() })) }) } },
      handler: async ({ params, orgId }) => ({ items: (await runs.logs(orgId, params.id)) as { ts: string; level: 'info' | 'warn' | 'error'; message: string }[] }),
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/runs/{id}/cancel',
      summary: 'Cancel a run',
      description: "Stops a queued or running run (a build's with its recipes' runs): a running statement is stopped in the database, and every output stays as it was. The answer may still say `running` while it stops.",
      capability: 'pipeline.run',
      request: { params: idParams },
      responses: { 200: { description: 'The run', schema: runSchema }, 409: { description: 'The run already ended' } },
      handler: async ({ params, orgId, audit }) => {
        const run = await runner.cancel(orgId, params.id);
        await audit.record({ action: 'pipeline.run.cancel', targetType: 'run', targetId: run.id });
        return run;
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/flows/{project_id}',
      summary: "A project's flow",
      description: "The project's datasets and recipes as a graph (dataset → recipe → dataset), with the datasets of other projects its recipes read.",
      capability: 'pipeline.read',
      request: { params: s.idParam('project_id') },
      responses: { 200: { description: 'The flow', schema: flowSchema } },
      handler: async ({ params, orgId }) => {
        if (!(await projects.exists(orgId, params.project_id))) throw problems.notFound(`no project ${params.project_id} in this organization`);
        return flowOf(orgId, params.project_id, recipes, runs, catalog);
      },
    }),
  ];
}
