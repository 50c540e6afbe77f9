import type { DatasetCatalog } from '../datasets/public.ts';
import type { RecipeStore } from './recipe-store.ts';
import type { RunStore } from './run-store.ts';

/**
 * A project's flow: its datasets and recipes, and the datasets of other projects its recipes read,
 * as nodes and edges (input dataset → recipe → output dataset).
 */
export async function flowOf(orgId: number, projectId: number, recipes: RecipeStore, runs: RunStore, catalog: DatasetCatalog) {
  const own = await recipes.list(orgId, { project_id: projectId });
  const datasets = new Map((await catalog.inProject(orgId, projectId)).map((d) => [d.id, d]));
  for (const id of own.flatMap((r) => [...r.inputs, ...r.outputs])) {
    if (!datasets.has(id)) datasets.set(id, await catalog.get(orgId, id));
  }
  const statuses = await runs.lastStatuses(orgId, own.map((r) => r.id));
  const nodes = [
    ...[...datasets.values()].map((d) => ({ id: `dataset:${d.id}`, kind: 'dataset' as const, ref_id: d.id, name: d.name, type: null, project_id: d.project_id, last_run_status: null })),
    ...own.map((r) => ({ id: `recipe:${r.id}`, kind: 'recipe' as const, ref_id: r.id, name: r.name, type: r.type, project_id: r.project_id, last_run_status: statuses.get(r.id) ?? null })),
  ];
  const edges = own.flatMap((r) => [...r.inputs.map((d) => ({ from: `dataset:${d}`, to: `recipe:${r.id}` })), ...r.outputs.map((d) => ({ from: `recipe:${r.id}`, to: `dataset:${d}` }))]);
  return { nodes, edges };
}
