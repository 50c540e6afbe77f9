import { definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { pipelineRecipeTypes, recipeTypes } from './public.ts';
import { RecipeTypes } from './recipe-types.ts';

/**
 * The `pipeline` router. For now it owns the recipe types (spec §2.7): plugins contribute them to
 * `pipeline.recipe-types`, the pipeline's code finds them through `pipelineRecipeTypes`, and
 * `GET /api/plugins/recipe-types` lists them through the registry's `contributions`.
 */
export default definePlugin({
  deps: { enablement: kernelServices.pluginEnablement },
  init: ({ enablement }, ctx) => {
    const types = new RecipeTypes(ctx.pluginId, enablement);
    ctx.provideExtensionPoint(recipeTypes, (contribution) => types.accept(contribution), {
      check: (contribution) => types.check(contribution),
      list: async (orgId) => (await types.list(orgId)).map((type) => ({ id: type.id, plugin_id: type.pluginId, description: type.description, params: type.params })),
    });
    ctx.provideService(pipelineRecipeTypes, types);
  },
});
