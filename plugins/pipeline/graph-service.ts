import type { PipelineGraph } from './public.ts';
import type { RecipePlanning } from './planning.ts';
import type { RecipeExecution } from './recipe-execution.ts';
import type { RecipeStore } from './recipe-store.ts';

/** The `pipeline.graph` service: recipes as a graph, and their column origins planned from their definitions. */
export function graphService(recipes: RecipeStore, execution: RecipeExecution, planning: RecipePlanning): PipelineGraph {
  return {
    recipes: async (orgId) => (await recipes.list(orgId)).map(({ id, project_id, name, type, inputs, outputs }) => ({ id, project_id, name, type, inputs, outputs })),
    async columnOrigins(orgId, recipeId) {
      const recipe = await recipes.get(orgId, recipeId);
      try {
        const type = await execution.typeFor(orgId, recipe.type, recipe.params);
        if (!type.plan) return null;
        const inputs = await planning.expected(await planning.datasets(orgId, recipe.inputs, 'inputs'), null);
        const planned = await planning.plan(type, recipe.params, null, inputs, recipe.outputs.length);
        return planned.map((output, i) => ({ dataset_id: recipe.outputs[i], columns: output.planned.columns.map((c) => ({ name: c.name, origin: c.origin })) }));
      } catch {
        // A type no longer offered, or a definition that no longer fits its inputs: origins unknown.
        return null;
      }
    },
  };
}
