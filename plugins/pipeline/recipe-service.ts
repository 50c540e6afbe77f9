import { actingUser, type Principal } from '../../kernel/plugin-api.ts';
import type { PipelineRecipes, RecipeDefinition } from './public.ts';
import type { RecipeChecks } from './recipe-checks.ts';
import type { Recipe, RecipeStore } from './recipe-store.ts';

/** A recipe as the API answers it: without the organization and author kept beside it. */
export const publicRecipe = ({ org_id: _org, created_by: _by, ...recipe }: Recipe) => ({ ...recipe, params: recipe.params as Record<string, unknown> });

/**
 * Recipes created, changed, listed and deleted with the checks of the /api/pipeline/recipes routes
 * (which call it): the `pipeline.recipes` service, for plugins that write recipes (a dbt import).
 * Auditing is the caller's business.
 */
export function recipeService(recipes: RecipeStore, checks: RecipeChecks): PipelineRecipes {
  return {
    async create(orgId: number, fields: RecipeDefinition, principal: Principal) {
      await checks.check(orgId, fields, principal);
      return publicRecipe(await recipes.create(orgId, fields, actingUser(principal)?.userId ?? null, (trx) => checks.graph(trx, orgId, fields, null)));
    },
    async update(orgId: number, id: number, changes: Partial<Omit<RecipeDefinition, 'project_id'>>, principal: Principal) {
      const current = await recipes.get(orgId, id);
      const fields = { project_id: current.project_id, name: changes.name ?? current.name, type: changes.type ?? current.type, inputs: changes.inputs ?? current.inputs, outputs: changes.outputs ?? current.outputs, params: changes.params ?? current.params };
      await checks.check(orgId, fields, principal);
      return publicRecipe(await recipes.update(orgId, id, fields, (trx) => checks.graph(trx, orgId, fields, id)));
    },
    get: async (orgId, id) => publicRecipe(await recipes.get(orgId, id)),
    list: async (orgId, filter = {}) => (await recipes.list(orgId, filter)).map(publicRecipe),
    remove: async (orgId, id) => publicRecipe(await recipes.remove(orgId, id)),
  };
}
