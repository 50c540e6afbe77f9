import type { DbtResource } from './manifest.ts';
import type { Rendered } from './render.ts';

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * A model's compiled SQL with each relation dbt wrote (`"db"."schema"."orders"`, `ANALYTICS.DEV.orders`,
 * as the resource's `relationNames` spell it) replaced by its dataset's quoted name; `reads`: the resources it
 * names. A relation counts only as a whole name, not inside a longer one. Null when the compiled SQL
 * reads the model's own relation (it was compiled as an incremental run): its raw Jinja is rendered
 * instead, `is_incremental()` false.
 */
export function rewriteCompiled(model: DbtResource, compiled: string, resources: DbtResource[], datasetOf: Map<string, string>): Rendered | null {
  // Longest first: `db.s.orders_v2` is not rewritten as `db.s.orders` followed by `_v2`.
  const relations = resources.flatMap((resource) => resource.relationNames.map((name) => ({ resource, name }))).sort((a, b) => b.name.length - a.name.length);
  let sql = compiled;
  const reads: string[] = [];
  for (const { resource, name } of relations) {
    const pattern = new RegExp(`(?<![\\w."\`\\]])${escape(name)}(?![\\w"\`\\[])`, 'gi');
    if (!pattern.test(sql)) continue;
    if (resource.uniqueId === model.uniqueId) return null;
    const dataset = datasetOf.get(resource.uniqueId);
    if (dataset === undefined) return { error: `it reads ${resource.uniqueId}, which is not imported` };
    reads.push(resource.uniqueId);
    sql = sql.replace(pattern, () => `"${dataset}"`);
  }
  return { sql, reads };
}
