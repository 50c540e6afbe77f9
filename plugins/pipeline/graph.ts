import type { Kysely } from 'kysely';

/** A recipe as the graph sees it: what it reads and writes. */
export interface RecipeNode {
  id: number;
  project_id: number;
  inputs: number[];
  outputs: number[];
}

/**
 * One organization's recipes as a graph over datasets: which recipe writes each dataset, which
 * read it, what lies upstream and downstream. Built from the link table in one read.
 */
export class RecipeGraph {
  readonly recipes = new Map<number, RecipeNode>();
  private readonly producers = new Map<number, number>();
  private readonly consumers = new Map<number, number[]>();

  constructor(nodes: RecipeNode[]) {
    for (const node of nodes) {
      this.recipes.set(node.id, node);
      for (const output of node.outputs) this.producers.set(output, node.id);
      for (const input of node.inputs) this.consumers.set(input, [...(this.consumers.get(input) ?? []), node.id]);
    }
  }

  static async load(db: Kysely<any>, orgId: number): Promise<RecipeGraph> {
    const [recipes, links] = await Promise.all([
      db.selectFrom('pipeline_recipes').select(['id', 'project_id']).where('org_id', '=', orgId).execute(),
      db.selectFrom('pipeline_recipe_datasets').select(['recipe_id', 'dataset_id', 'role']).where('org_id', '=', orgId).orderBy('position').execute(),
    ]);
    return new RecipeGraph(
      recipes.map((r) => {
        const own = links.filter((l) => Number(l.recipe_id) === Number(r.id));
        const of = (role: string) => own.filter((l) => l.role === role).map((l) => Number(l.dataset_id));
        return { id: Number(r.id), project_id: Number(r.project_id), inputs: of('input'), outputs: of('output') };
      }),
    );
  }

  /** The graph without one recipe (to check the recipe's new version against the rest). */
  without(recipeId: number): RecipeGraph {
    return new RecipeGraph([...this.recipes.values()].filter((r) => r.id !== recipeId));
  }

  producerOf(datasetId: number): number | undefined {
    return this.producers.get(datasetId);
  }

  consumersOf(datasetId: number): number[] {
    return this.consumers.get(datasetId) ?? [];
  }

  /** The recipes that feed the recipe directly (the producers of its inputs). */
  parentsOf(recipeId: number): number[] {
    const node = this.recipes.get(recipeId);
    return node ? [...new Set(node.inputs.map((d) => this.producers.get(d)).filter((r): r is number => r !== undefined))] : [];
  }

  /** Every dataset upstream of `datasetId` (itself excluded), nearest first. */
  upstreamDatasets(datasetId: number): number[] {
    const seen = new Set<number>();
    const queue = [datasetId];
    while (queue.length) {
      const producer = this.producers.get(queue.shift()!);
      if (producer === undefined) continue;
      for (const input of this.recipes.get(producer)!.inputs) {
        if (!seen.has(input)) {
          seen.add(input);
          queue.push(input);
        }
      }
    }
    return [...seen];
  }

  /**
   * The cycle a recipe reading `inputs` and writing `outputs` would close, as the dataset ids
   * around it in flow order, from one output back to it (an output upstream of one of its
   * inputs, or an output that is an input), or null.
   */
  cycleThrough(inputs: number[], outputs: number[]): number[] | null {
    for (const output of outputs) {
      if (inputs.includes(output)) return [output];
      for (const input of inputs) {
        const path = this.pathUpstream(input, output);
        if (path) return [...path.reverse(), output];
      }
    }
    return null;
  }

  /** The datasets from `from` up to `to` through producers, or null when `to` is not upstream of `from`. */
  private pathUpstream(from: number, to: number): number[] | null {
    const previous = new Map<number, number>();
    const queue = [from];
    const seen = new Set([from]);
    while (queue.length) {
      const current = queue.shift()!;
      if (current === to) {
        const path = [current];
        while (previous.has(path[path.length - 1])) path.push(previous.get(path[path.length - 1])!);
        return path.reverse();
      }
      const producer = this.producers.get(current);
      if (producer === undefined) continue;
      for (const input of this.recipes.get(producer)!.inputs) {
        if (seen.has(input)) continue;
        seen.add(input);
        previous.set(input, current);
        queue.push(input);
      }
    }
    return null;
  }

  /**
   * The recipes to run to build `targets`: their producers and, unless `targetsOnly`, every recipe
   * upstream of them; with the parents each waits for among them.
   */
  buildPlan(targets: number[], targetsOnly: boolean): Map<number, number[]> {
    const chosen = new Set<number>();
    const queue = targets.map((d) => this.producers.get(d)).filter((r): r is number => r !== undefined);
    while (queue.length) {
      const recipe = queue.shift()!;
      if (chosen.has(recipe)) continue;
      chosen.add(recipe);
      if (!targetsOnly) queue.push(...this.parentsOf(recipe));
    }
    return new Map([...chosen].map((recipe) => [recipe, this.parentsOf(recipe).filter((p) => chosen.has(p))]));
  }
}
