import { DATASET_RESOURCES, type DbtResource } from './manifest.ts';

const MAX_NAME = 63;

/** A dbt relation name as a dataset name (a SQL identifier: a letter, then letters, digits, underscores), lower-cased. */
export function asDatasetName(name: string): string {
  let cleaned = name.toLowerCase().replace(/[^a-z0-9_]+/g, '_');
  if (!/^[a-z]/.test(cleaned)) cleaned = `d_${cleaned}`;
  return cleaned.slice(0, MAX_NAME);
}

/** The names a resource may take, in order of preference (`count` of them). */
export function candidateNames(resource: DbtResource, count: number): string[] {
  const base = asDatasetName(resource.relation);
  const suffix = resource.resourceType === 'source' && resource.sourceName ? resource.sourceName : resource.resourceType;
  const candidates = [base, asDatasetName(`${base}_${suffix}`)];
  for (let n = 2; candidates.length < count; n++) candidates.push(asDatasetName(`${base.slice(0, MAX_NAME - 4)}_${n}`));
  return candidates;
}

/**
 * The dataset name each resource gets, decided the same way on every import:
 * - a resource imported before keeps its dataset (`kept`: unique_id → that dataset's name);
 * - the others claim names in a fixed order, models first, then seeds, snapshots, sources, each
 *   kind by unique_id: the first claim of a name wins; a later one takes `<name>_<source name>`
 *   for a source or `<name>_<resource type>` otherwise, then `_2`, `_3`… until one is free;
 * - `taken(name)` says whether a name belongs to a dataset outside this project's import (names are
 *   unique in the organization), which counts as claimed unless `adopt` accepts it (a seed or
 *   source whose data is already in the project).
 */
export function datasetNames(resources: DbtResource[], kept: Map<string, string>, taken: (name: string) => boolean, adopt: (resource: DbtResource, name: string) => boolean): Map<string, string> {
  const names = new Map<string, string>();
  const claimed = new Set<string>([...kept.values()].map((n) => n.toLowerCase()));
  for (const [id, name] of kept) names.set(id, name);
  const ordered = DATASET_RESOURCES.flatMap((type) => resources.filter((r) => r.resourceType === type && !kept.has(r.uniqueId)));
  for (const resource of ordered) {
    const candidates = candidateNames(resource, 100);
    const base = candidates[0];
    const free = (name: string) => !claimed.has(name) && (!taken(name) || adopt(resource, name));
    const chosen = candidates.find(free) ?? `${base.slice(0, 40)}_${claimed.size}`;
    claimed.add(chosen);
    names.set(resource.uniqueId, chosen);
  }
  return names;
}
