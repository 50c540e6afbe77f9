import type { Transaction } from 'kysely';
import { problems, type Principal } from '../../kernel/plugin-api.ts';
import type { ProjectCatalog } from '../projects/public.ts';
import { RecipeGraph } from './graph.ts';
import { checkCounts, type RecipePlanning } from './planning.ts';
import type { RecipeExecution } from './recipe-execution.ts';
import type { Recipe, RecipeFields } from './recipe-store.ts';

/** What a recipe must be to be saved, and the columns it would write. */
export class RecipeChecks {
  constructor(
    private readonly projects: ProjectCatalog,
    private readonly planning: RecipePlanning,
    private readonly execution: RecipeExecution,
  ) {}

  /**
   * Checks a recipe before it is saved, each problem a 4xx naming the field; then saves it with
   * `save`, whose transaction runs `graph` (the organization's recipe graph locked and read in it:
   * two recipes saved at once never close a cycle neither check saw).
   */
  async check(orgId: number, fields: RecipeFields, principal: Principal): Promise<void> {
    if (!(await this.projects.exists(orgId, fields.project_id))) throw problems.unprocessable(`project ${fields.project_id} does not exist in this organization`, [{ path: 'body.project_id', message: 'no such project' }]);
    const type = await this.execution.typeFor(orgId, fields.type, fields.params);
    const inputs = await this.planning.expected(await this.planning.datasets(orgId, fields.inputs, 'body.inputs'), principal);
    const outputs = await this.planning.datasets(orgId, fields.outputs, 'body.outputs');
    outputs.forEach((output, i) => {
      if (fields.outputs.indexOf(output.id) !== i) throw problems.badRequest(`dataset ${output.id} is listed twice as an output`, [{ path: `body.outputs.${i}`, message: 'listed twice' }]);
    });
    const outside = outputs.findIndex((output) => output.project_id !== fields.project_id);
    if (outside >= 0) throw problems.unprocessable(`output dataset "${outputs[outside].name}" belongs to another project than the recipe's`, [{ path: `body.outputs.${outside}`, message: 'in another project' }]);
    if (type.plan) await this.planning.plan(type, fields.params, principal, inputs, outputs.length);
    else {
      checkCounts(type, inputs.length, outputs.length);
      await type.handler!.describe?.({ orgId, projectId: fields.project_id, principal, params: fields.params, inputs });
    }
  }

  /**
   * The graph's part of the check, inside the saving transaction (reads through `trx` only): an
   * output another recipe writes, or a cycle, is a 409 naming the datasets (by id: names are
   * another plugin's to read, outside this transaction).
   */
  async graph(trx: Transaction<any>, orgId: number, fields: RecipeFields, recipeId: number | null): Promise<void> {
    const graph = await RecipeGraph.load(trx, orgId);
    const others = recipeId === null ? graph : graph.without(recipeId);
    for (const output of fields.outputs) {
      const producer = others.producerOf(output);
      if (producer !== undefined) throw problems.conflict(`dataset ${output} is already the output of recipe ${producer} (body.outputs)`);
    }
    const cycle = others.cycleThrough(fields.inputs, fields.outputs);
    if (cycle) throw problems.conflict(`the recipe would close a cycle through datasets ${cycle.join(' → ')} (body.inputs)`);
  }

  /** Each output's columns as the recipe would write them (planned, or described by a handler type), or as they are (a handler type's without `describe`). */
  async outputColumns(recipe: Recipe, principal: Principal) {
    const type = await this.execution.typeFor(recipe.org_id, recipe.type, recipe.params);
    const inputs = await this.planning.expected(await this.planning.datasets(recipe.org_id, recipe.inputs, 'inputs'), principal);
    const outputs = await this.planning.datasets(recipe.org_id, recipe.outputs, 'outputs');
    const describe = type.handler?.describe;
    if (describe) {
      const columns = await describe({ orgId: recipe.org_id, projectId: recipe.project_id, principal, params: recipe.params, inputs });
      // As a run would write them: every column PII when any input column is (see the handler's load).
      const pii = inputs.some((d) => d.columns.some((c) => c.pii));
      return outputs.map((d) => ({ dataset_id: d.id, dataset: d.name, source: 'plan' as const, columns: columns.map((c) => ({ name: c.name, type: c.type, pii })) }));
    }
    if (!type.plan) return outputs.map((d) => ({ dataset_id: d.id, dataset: d.name, source: 'last_run' as const, columns: d.columns.map((c) => ({ name: c.name, type: c.type, pii: c.pii })) }));
    const planned = await this.planning.plan(type, recipe.params, principal, inputs, outputs.length);
    return outputs.map((d, i) => ({ dataset_id: d.id, dataset: d.name, source: 'plan' as const, columns: planned[i].columns }));
  }
}
