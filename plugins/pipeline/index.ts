import { definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { datasetCatalog, datasetContracts, DATASET_DELETED, type DatasetDeletedEvent } from '../datasets/public.ts';
import { projectCatalog, projectDeleteGuards } from '../projects/public.ts';
import { pipelineMigrations } from './migrations.ts';
import { RecipePlanning } from './planning.ts';
import { pipelineGraph, pipelineRecipes, pipelineRecipeTypes, pipelineRuns, pipelineScenarios, recipeTypes, runKinds, stepTypes } from './public.ts';
import { recipeService } from './recipe-service.ts';
import { RecipeChecks } from './recipe-checks.ts';
import { RecipeExecution } from './recipe-execution.ts';
import { RecipeStore } from './recipe-store.ts';
import { RecipeTypes } from './recipe-types.ts';
import { pipelineRoutes } from './routes.ts';
import { RunKinds } from './run-kinds.ts';
import { PipelineRunner } from './runs.ts';
import { RunStore } from './run-store.ts';
import { graphService } from './graph-service.ts';
import { ScenarioChecks } from './scenario-checks.ts';
import { scenarioRoutes } from './scenario-routes.ts';
import { ScenarioRunner } from './scenario-runner.ts';
import { ScenarioStore } from './scenario-store.ts';
import { ScenarioTriggers } from './scenario-triggers.ts';
import { StepTypes } from './step-types.ts';

/** How often an instance looks for runs whose work ended without them (an instance killed twice mid-run). */
const SETTLE_EVERY_MS = 15_000;

/**
 * The `pipeline` router: recipes over datasets, the recipe types plugins contribute
 * (`pipeline.recipe-types`), runs as background work, builds, flows; and the services the jobs,
 * lineage, scheduler and scenarios build on (`pipeline.runs`, `pipeline.graph`); scenarios of steps
 * whose types plugins contribute (`pipeline.step-types`), started by hand, by a dataset's change or
 * by a schedule (`pipeline.scenarios`); runs of kinds other plugins contribute (`pipeline.run-kinds`).
 */
export default definePlugin({
  deps: { storage: kernelServices.storage, enablement: kernelServices.pluginEnablement, work: kernelServices.work, events: kernelServices.events, config: kernelServices.config, logger: kernelServices.logger },
  migrations: pipelineMigrations,
  init: ({ storage, enablement, work, events, config, logger }, ctx) => {
    const types = new RecipeTypes(ctx.pluginId, enablement);
    ctx.provideExtensionPoint(recipeTypes, (contribution) => types.accept(contribution), {
      check: (contribution) => types.check(contribution),
      list: async (orgId) => (await types.list(orgId)).map((type) => ({ id: type.id, plugin_id: type.pluginId, description: type.description, params: type.params })),
    });
    ctx.provideService(pipelineRecipeTypes, types);

    const catalog = ctx.useService(datasetCatalog);
    const projects = ctx.useService(projectCatalog);
    const recipes = new RecipeStore(storage);
    const runs = new RunStore(storage, events);
    const planning = new RecipePlanning(storage, catalog, async (orgId, datasetId) => {
      const recipeId = await recipes.producerOf(orgId, datasetId);
      if (recipeId === null) return null;
      const recipe = await recipes.get(orgId, recipeId);
      const type = await types.get(orgId, recipe.type);
      return type ? { recipe, type } : null;
    });
    const execution = new RecipeExecution(storage, catalog, types, planning);
    const checks = new RecipeChecks(projects, planning, execution);
    const scenarios = new ScenarioStore(storage);
    const kinds = new RunKinds(ctx.pluginId, enablement);
    ctx.provideExtensionPoint(runKinds, (contribution) => kinds.accept(contribution));
    const runner = new PipelineRunner(storage, work, runs, recipes, execution, catalog, scenarios, config.RECIPE_TIMEOUT_S, kinds);
    runner.register();
    ctx.provideService(pipelineRuns, runner);
    const stepTypeCatalog = new StepTypes(ctx.pluginId, enablement);
    ctx.provideExtensionPoint(stepTypes, (contribution) => stepTypeCatalog.accept(contribution), { list: (orgId) => stepTypeCatalog.described(orgId) });
    const scenarioRunner = new ScenarioRunner(storage, work, runs, scenarios, stepTypeCatalog);
    scenarioRunner.register();
    new ScenarioTriggers(storage, work, scenarios, scenarioRunner).register(events);
    ctx.provideService(pipelineScenarios, scenarioRunner);
    ctx.provideService(pipelineGraph, graphService(recipes, execution, planning, ctx.useService(datasetContracts)));
    const recipeWrites = recipeService(recipes, checks);
    ctx.provideService(pipelineRecipes, recipeWrites);

    ctx.contribute(projectDeleteGuards, async (orgId, projectId) => {
      const count = await recipes.countInProject(orgId, projectId);
      if (count) return `it holds ${count} recipe${count === 1 ? '' : 's'}; delete them first`;
      const scenarioCount = await scenarios.countInProject(orgId, projectId);
      return scenarioCount ? `it holds ${scenarioCount} scenario${scenarioCount === 1 ? '' : 's'}; delete them first` : null;
    });
    events.subscribe('dataset-deleted', {
      types: [DATASET_DELETED],
      handle: async (event) => recipes.unlinkDataset(event.org_id!, (event.payload as DatasetDeletedEvent).dataset_id),
    });
    const settle = setInterval(() => void runner.settleAbandoned().catch((err) => logger.warn({ err }, 'settling abandoned pipeline runs failed')), SETTLE_EVERY_MS);
    settle.unref();
    ctx.onDispose(() => clearInterval(settle));

    const scenarioChecks = new ScenarioChecks(projects, catalog, stepTypeCatalog);
    return {
      routes: [...pipelineRoutes({ recipes, recipeWrites, checks, runner, runs, catalog, projects, scenarios }), ...scenarioRoutes({ scenarios, checks: scenarioChecks, runner: scenarioRunner, runs, stepTypes: stepTypeCatalog })],
    };
  },
});
