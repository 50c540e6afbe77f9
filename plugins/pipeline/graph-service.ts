import type { DatasetContracts } from '../datasets/public.ts';
import type { ExpectedDataset, RecipePlanning } from './planning.ts';
import type { PipelineGraph } from './public.ts';
import type { RecipeExecution } from './recipe-execution.ts';
import type { RecipeStore } from './recipe-store.ts';

/**
 * The `pipeline.graph` service: recipes as a graph, and their column origins planned from their
 * definitions: over the inputs as they are, or, when the recipe no longer fits them (an input
 * lost a column it reads), over the inputs as their current schema contracts say, the schema it
 * was built against: what a breaking change touches downstream is then still known.
 */
export function graphService(recipes: RecipeStore, execution: RecipeExecution, planning: RecipePlanning, contracts: DatasetContracts): PipelineGraph {
  return {
    recipes: async (orgId) => (await recipes.list(orgId)).map(({ id, project_id, name, type, inputs, outputs }) => ({ id, project_id, name, type, inputs, outputs })),
    async columnOrigins(orgId, recipeId) {
      const recipe = await recipes.get(orgId, recipeId);
      const type = await execution.typeFor(orgId, recipe.type, recipe.params).catch(() => null);
      // A type no longer offered, or run by a handler: origins unknown.
      if (!type?.plan) return null;
      const live = await planning
        .datasets(orgId, recipe.inputs, 'inputs')
        .then((inputs) => planning.expected(inputs, null))
        .catch(() => null);
      if (!live) return null; // an input is gone
      const contracted = (): Promise<ExpectedDataset[]> =>
        Promise.all(
          live.map(async (input) => {
            const contract = await contracts.current(orgId, input.id);
            // Planned over empty rows of the contracted columns, as an input not yet built is.
            return contract ? { ...input, columns: contract.columns.map((c) => ({ name: c.name, type: c.type, pii: input.columns.find((live) => live.name === c.name)?.pii ?? false })), unbuilt: true } : input;
          }),
        );
      for (const inputs of [async () => live, contracted]) {
        try {
          const planned = await planning.plan(type, recipe.params, null, await inputs(), recipe.outputs.length);
          return planned.map((output, i) => ({ dataset_id: recipe.outputs[i], columns: output.planned.columns.map((c) => ({ name: c.name, origin: c.origin })) }));
        } catch {
          // The definition does not fit these inputs: try the next view of them.
        }
      }
      return null;
    },
  };
}
