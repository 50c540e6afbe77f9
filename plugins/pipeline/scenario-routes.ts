import { defineRoute, identitySchemas as s, reply, storedActorOf, z } from '../../kernel/plugin-api.ts';
import { runAnswer } from './public.ts';
import type { ScenarioChecks } from './scenario-checks.ts';
import type { ScenarioRunner } from './scenario-runner.ts';
import { scenarioInput, scenarioPatch, scenarioSchema, stepTypeSchema } from './scenario-schemas.ts';
import type { Scenario, ScenarioStore } from './scenario-store.ts';
import type { StepTypes } from './step-types.ts';
import type { RunStore } from './run-store.ts';

export interface ScenarioRouteDeps {
  scenarios: ScenarioStore;
  checks: ScenarioChecks;
  runner: ScenarioRunner;
  runs: RunStore;
  stepTypes: StepTypes;
}

const base = { security: 'bearer', orgScoped: true } as const;
const idParams = s.idParam('id');
const publicScenario = ({ org_id: _org, run_as: _as, trigger_seq: _seq, ...scenario }: Scenario) => ({ ...scenario, triggers: scenario.triggers as Record<string, unknown>[] });
/** Who the scenario's triggered runs will act for: the user saving it, within their token's scopes. */

/** The scenario routes of the `pipeline` router (/api/pipeline/scenarios, /api/pipeline/step-types). */
export function scenarioRoutes({ scenarios, checks, runner, runs, stepTypes }: ScenarioRouteDeps) {
  return [
    defineRoute({
      ...base,
      method: 'get',
      path: '/step-types',
      summary: 'List step types',
      description: "The scenario step types offered in this organization (`pipeline.step-types`, by the plugins enabled here), each with its parameters' JSON Schema, by id.",
      capability: 'pipeline.read',
      responses: { 200: { description: 'Step types', schema: z.object({ items: z.array(stepTypeSchema) }) } },
      handler: async ({ orgId }) => ({ items: await stepTypes.described(orgId) }),
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/scenarios',
      summary: 'Create a scenario',
      description:
        'A scenario is a list of steps run in order (a build, quality rules, a schema drift check, a governed SQL check, a message…), with its triggers (`dataset_changed`: started after those datasets change, debounced) and reporters (a message through a connector when a run fails or succeeds). Each step type must be offered here and its params valid against its JSON Schema.',
      capability: 'pipeline.write',
      request: { body: scenarioInput },
      responses: {
        201: { description: 'Created', schema: scenarioSchema },
        409: { description: 'A scenario of that name exists in the project' },
        422: { description: 'A project, dataset or step type that does not exist here (named)' },
      },
      handler: async ({ body, orgId, principal, audit }) => {
        const scenario = await scenarios.create(orgId, await checks.check(orgId, body), storedActorOf(principal));
        await audit.record({ action: 'pipeline.scenario.create', targetType: 'scenario', targetId: scenario.id, details: { name: scenario.name } });
        return reply(201, publicScenario(scenario));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/scenarios',
      summary: 'List scenarios',
      description: 'The scenarios of this organization, of one project with `project_id`.',
      capability: 'pipeline.read',
      request: { query: z.object({ project_id: s.pathId.optional() }) },
      responses: { 200: { description: 'Scenarios', schema: z.object({ items: z.array(scenarioSchema) }) } },
      handler: async ({ query, orgId }) => ({ items: (await scenarios.list(orgId, query.project_id)).map(publicScenario) }),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/scenarios/{id}',
      summary: 'Get a scenario',
      description: 'One scenario of this organization.',
      capability: 'pipeline.read',
      request: { params: idParams },
      responses: { 200: { description: 'The scenario', schema: scenarioSchema } },
      handler: async ({ params, orgId }) => publicScenario(await scenarios.get(orgId, params.id)),
    }),
    defineRoute({
      ...base,
      method: 'patch',
      path: '/scenarios/{id}',
      summary: 'Change a scenario',
      description: 'Changes the name, steps, triggers or reporters (its project stays), checked as at creation. Runs already started keep the steps they started with; triggered runs act for whoever saved the scenario last.',
      capability: 'pipeline.write',
      request: { params: idParams, body: scenarioPatch },
      responses: {
        200: { description: 'The scenario', schema: scenarioSchema },
        409: { description: 'A scenario of that name exists in the project' },
        422: { description: 'A dataset or step type that does not exist here (named)' },
      },
      handler: async ({ params, body, orgId, principal, audit }) => {
        const current = await scenarios.get(orgId, params.id);
        const fields = await checks.check(orgId, { project_id: current.project_id, name: body.name ?? current.name, steps: body.steps ?? current.steps, triggers: body.triggers ?? current.triggers, reporters: body.reporters ?? current.reporters });
        const scenario = await scenarios.update(orgId, params.id, fields, storedActorOf(principal));
        await audit.record({ action: 'pipeline.scenario.update', targetType: 'scenario', targetId: scenario.id, details: { changes: Object.keys(body) } });
        return publicScenario(scenario);
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/scenarios/{id}',
      summary: 'Delete a scenario',
      description: 'Deletes the scenario; its past runs stay, and a run under way goes on to its end.',
      capability: 'pipeline.write',
      request: { params: idParams },
      responses: { 204: { description: 'Deleted' } },
      handler: async ({ params, orgId, audit }) => {
        const scenario = await scenarios.remove(orgId, params.id);
        await audit.record({ action: 'pipeline.scenario.delete', targetType: 'scenario', targetId: scenario.id, details: { name: scenario.name } });
        return reply(204);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/scenarios/{id}/run',
      summary: 'Run a scenario',
      description:
        'Queues a run of kind `scenario` (background work: any instance runs it). Its steps run in order; GET /api/pipeline/runs/{id} shows each step with its status and output. A failed step ends the run `failed` and the later steps `skipped`, unless it says `continue_on_failure`. Cancel it like any run.',
      capability: 'pipeline.run',
      request: { params: idParams },
      responses: { 202: { description: 'Queued', schema: runAnswer } },
      handler: async ({ params, orgId, principal, audit }) => {
        const run = await runner.start(orgId, params.id, principal, principal.via === 'pat' ? 'api' : 'manual');
        await audit.record({ action: 'pipeline.scenario.run', targetType: 'scenario', targetId: params.id, details: { run_id: run.id } });
        return reply(202, { run: await runs.get(orgId, run.id) });
      },
    }),
  ];
}
