import { ColumnLineage, type LineageReader } from './column-lineage.ts';
import type { Maybe } from '../../kernel/plugin-api.ts';
import type { DatasetColumns, Impact, LineageConsumerSource } from './public.ts';

/** A consumer source with the plugin that contributed it. */
export interface ConsumerSource {
  pluginId: string;
  source: LineageConsumerSource;
}

/**
 * The impact of changing some columns of a dataset: the downstream columns computed from them
 * (through column origins), the recipes they flow through, and what the contributed consumer
 * sources say reads the dataset's columns or the affected ones, those of plugins serving the
 * organization only (`offered`: a plugin disabled there is invisible there). The dataset is the
 * caller's to check (`reader` reads the organization's recipes and datasets).
 */
export async function impactOf(reader: LineageReader, sources: Iterable<ConsumerSource>, offered: (pluginId: string, orgId: number) => Maybe<boolean>, datasetId: number, columns?: string[]): Promise<Impact> {
  const { orgId } = reader;
  const asked = columns ?? (await reader.columnsOf(datasetId));
  const steps = await new ColumnLineage(reader).downstream(asked.map((column) => ({ dataset_id: datasetId, column })));

  const affected = new Map<number, string[]>();
  for (const step of steps) affected.set(step.dataset_id, [...(affected.get(step.dataset_id) ?? []), step.column]);
  const datasets = await Promise.all([...affected].map(async ([id, names]) => ({ dataset_id: id, dataset: (await reader.dataset(id))?.name ?? null, columns: names })));
  const recipeIds = new Set(steps.map((s) => s.recipe_id));
  const recipes = reader.recipes.filter((r) => recipeIds.has(r.id)).map(({ id, name, type }) => ({ id, name, type }));

  const read: DatasetColumns[] = [{ dataset_id: datasetId, columns: asked }, ...datasets.map(({ dataset_id, columns: names }) => ({ dataset_id, columns: names }))];
  // Each consumer as the contract has it (a contributor's extra fields are not passed on), with who reported it.
  const reported = async ({ pluginId, source }: ConsumerSource) =>
    !(await offered(pluginId, orgId)) ? [] : (await source(orgId, read)).map(({ kind, id, name, dataset_id, columns: names, details }) => ({ kind, id, name, plugin_id: pluginId, dataset_id, columns: names, ...(details ? { details } : {}) }));
  const consumers = (await Promise.all([...sources].map(reported))).flat();
  return { dataset_id: datasetId, columns: asked, datasets, recipes, jobs: consumers.filter((c) => c.kind === 'job'), consumers };
}
