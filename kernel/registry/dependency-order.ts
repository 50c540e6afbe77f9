import type { PluginManifest } from './manifest.ts';

type ManifestsById = Map<string, { manifest: PluginManifest }>;

/** Every plugin the given one depends on, directly or not. */
export function transitiveDependencies(id: string, byId: ManifestsById): Set<string> {
  const result = new Set<string>();
  const visit = (current: string) => {
    for (const dep of byId.get(current)?.manifest.depends_on ?? []) {
      if (!result.has(dep)) {
        result.add(dep);
        visit(dep);
      }
    }
  };
  visit(id);
  return result;
}

/**
 * Dependency order (Kahn) over the given ids; ids caught in a cycle are returned apart. Among the
 * plugins ready together, those of lower `rank` load first (then by id): the plugins of the first
 * manifest folder (the shipped ones) before those of later folders, so that where two contribute
 * the same key to an extension point, the shipped one is the first and keeps it.
 */
export function topologicalOrder(ids: Set<string>, byId: ManifestsById, rank: (id: string) => number = () => 0) {
  const pending = new Map([...ids].filter((id) => byId.has(id)).map((id) => [id, byId.get(id)!.manifest.depends_on.filter((d) => ids.has(d) && byId.has(d))]));
  const order: string[] = [];
  while (pending.size) {
    const ready = [...pending]
      .filter(([, deps]) => deps.every((d) => !pending.has(d)))
      .map(([id]) => id)
      .sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
    if (!ready.length) break;
    for (const id of ready) {
      order.push(id);
      pending.delete(id);
    }
  }
  return { order, cycle: [...pending.keys()].sort() };
}
