import type { RecipeSummary } from '../pipeline/public.ts';

export type Direction = 'upstream' | 'downstream' | 'both';

/** A node of the lineage graph before it is named: a dataset or a recipe, at its signed distance. */
export interface LineageNode {
  id: string;
  kind: 'dataset' | 'recipe';
  ref_id: number;
  /** Negative upstream, positive downstream, 0 the dataset asked about. */
  depth: number;
}

export const datasetNode = (id: number) => `dataset:${id}`;
export const recipeNode = (id: number) => `recipe:${id}`;

/**
 * The datasets and recipes around a dataset, breadth first. One step is one recipe: a recipe
 * writing the dataset is at depth -1 with its inputs, a recipe reading it at depth 1 with its
 * outputs; `depth` recipes are followed each way at most. Each node keeps its nearest depth.
 */
export function datasetLineage(recipes: RecipeSummary[], datasetId: number, direction: Direction, depth: number): { nodes: LineageNode[]; edges: { from: string; to: string }[] } {
  const nodes = new Map<string, LineageNode>([[datasetNode(datasetId), { id: datasetNode(datasetId), kind: 'dataset', ref_id: datasetId, depth: 0 }]]);
  const add = (kind: LineageNode['kind'], refId: number, at: number) => {
    const id = kind === 'dataset' ? datasetNode(refId) : recipeNode(refId);
    if (nodes.has(id)) return false;
    nodes.set(id, { id, kind, ref_id: refId, depth: at });
    return true;
  };
  const walk = (sign: -1 | 1) => {
    // Upstream a dataset leads to the recipes writing it and on to their inputs; downstream to the recipes reading it and on to their outputs.
    const next = (dataset: number) => recipes.filter((r) => (sign < 0 ? r.outputs : r.inputs).includes(dataset));
    let frontier = [datasetId];
    for (let step = 1; step <= depth && frontier.length; step++) {
      const reached: number[] = [];
      for (const recipe of frontier.flatMap(next)) {
        if (!add('recipe', recipe.id, sign * step)) continue;
        for (const dataset of sign < 0 ? recipe.inputs : recipe.outputs) if (add('dataset', dataset, sign * step)) reached.push(dataset);
      }
      frontier = reached;
    }
  };
  if (direction !== 'downstream') walk(-1);
  if (direction !== 'upstream') walk(1);
  return { nodes: [...nodes.values()], edges: edgesAmong(recipes, nodes) };
}

/** Every link between the nodes found: dataset → recipe for an input, recipe → dataset for an output. */
function edgesAmong(recipes: RecipeSummary[], nodes: Map<string, LineageNode>): { from: string; to: string }[] {
  const edges: { from: string; to: string }[] = [];
  for (const recipe of recipes) {
    const node = recipeNode(recipe.id);
    if (!nodes.has(node)) continue;
    for (const input of new Set(recipe.inputs)) if (nodes.has(datasetNode(input))) edges.push({ from: datasetNode(input), to: node });
    for (const output of new Set(recipe.outputs)) if (nodes.has(datasetNode(output))) edges.push({ from: node, to: datasetNode(output) });
  }
  return edges;
}
