import { z } from 'zod';
import { fieldErrorsOf, problems } from '../../kernel/plugin-api.ts';

/** The manifest schema versions read: dbt 1.3 (v7) to 1.8 and later (v12). */
export const SUPPORTED_VERSIONS = [7, 8, 9, 10, 11, 12];

/** The resources that become datasets, in the order they claim dataset names (see `datasetNames`). */
export const DATASET_RESOURCES = ['model', 'seed', 'snapshot', 'source'] as const;
export type DatasetResourceType = (typeof DATASET_RESOURCES)[number];

export interface DbtColumn {
  name: string;
  description: string;
  /** The type written in the project's YAML (`data_type`), if any. */
  dataType: string | null;
}

/** A model, seed, snapshot or source, as the import reads it. */
export interface DbtResource {
  uniqueId: string;
  resourceType: DatasetResourceType;
  packageName: string;
  name: string;
  /** The relation's name in the warehouse: a model's alias, a source's identifier. */
  relation: string;
  /** The source's name (`source('jaffle_shop', 'orders')`: jaffle_shop), for a source. */
  sourceName: string | null;
  description: string;
  columns: DbtColumn[];
  /**
   * How dbt's SQL may name it, for rewriting compiled SQL: its `relation_name` (`"db"."schema"."orders"`);
   * without one (a seed before v8), its database, schema and relation as the adapters write them.
   */
  relationNames: string[];
  dependsOn: string[];
  language: string;
  rawCode: string | null;
  compiledCode: string | null;
  /** `config.column_types` of a seed. */
  columnTypes: Record<string, string>;
}

/** A generic test (`not_null`, `unique`…) attached to a resource. */
export interface DbtTest {
  uniqueId: string;
  /** `test_metadata.name`, null for a singular test (a SQL file). */
  testName: string | null;
  namespace: string | null;
  kwargs: Record<string, unknown>;
  attachedNode: string | null;
  columnName: string | null;
}

export interface DbtProject {
  schemaVersion: number;
  dbtVersion: string | null;
  projectName: string | null;
  resources: DbtResource[];
  tests: DbtTest[];
  /** Resources that are not imported, each with why (analyses, operations…): listed, never dropped silently. */
  ignored: { unique_id: string; reason: string }[];
}

const text = z.string().max(1_000_000);
const column = z.looseObject({ name: text, description: text.nullish(), data_type: text.nullish() });
const node = z.looseObject({
  unique_id: text,
  resource_type: text,
  name: text,
  package_name: text.nullish(),
  database: text.nullish(),
  schema: text.nullish(),
  alias: text.nullish(),
  identifier: text.nullish(),
  source_name: text.nullish(),
  description: text.nullish(),
  columns: z.record(z.string(), column).nullish(),
  relation_name: text.nullish(),
  depends_on: z.looseObject({ nodes: z.array(text).nullish() }).nullish(),
  language: text.nullish(),
  raw_code: text.nullish(),
  compiled_code: text.nullish(),
  config: z.looseObject({ column_types: z.record(z.string(), z.unknown()).nullish() }).nullish(),
  test_metadata: z.looseObject({ name: text, namespace: text.nullish(), kwargs: z.record(z.string(), z.unknown()).nullish() }).nullish(),
  attached_node: text.nullish(),
  column_name: text.nullish(),
});
const manifestShape = z.looseObject({
  metadata: z.looseObject({ dbt_schema_version: text, dbt_version: text.nullish(), project_name: text.nullish() }),
  nodes: z.record(z.string(), node),
  sources: z.record(z.string(), node).default({}),
  /** v12: unit tests (fixtures of given rows and expected rows), which no rule type checks. */
  unit_tests: z.record(z.string(), z.unknown()).default({}),
});

/**
 * `db.schema.name` as dbt's adapters write a relation: in double quotes (Postgres, Redshift, DuckDB…),
 * in backticks (BigQuery, Databricks) or bare (Snowflake's default), with and without the database.
 */
function relationSpellings(parts: (string | null | undefined)[]): string[] {
  const named = parts.filter((part): part is string => Boolean(part));
  return [named, named.slice(1)]
    .filter((form) => form.length >= 2)
    .flatMap((form) => ['"', '`', ''].map((quote) => form.map((part) => `${quote}${part}${quote}`).join('.')));
}

/** `https://schemas.getdbt.com/dbt/manifest/v12.json` → 12; anything else → null. */
function versionOf(url: string): number | null {
  const match = /\/dbt\/manifest\/v(\d{1,3})\.json$/.exec(url);
  return match ? Number(match[1]) : null;
}

/**
 * Reads a parsed manifest.json: its schema version first (one this import knows, else a 422 naming
 * it), then its shape (a 400 naming the first wrong fields under `body.manifest`).
 */
export function readManifest(manifest: unknown): DbtProject {
  const version = z.looseObject({ metadata: z.looseObject({ dbt_schema_version: z.string().max(1000) }) }).safeParse(manifest);
  if (!version.success) throw problems.badRequest('the manifest is not a dbt manifest.json: it has no metadata.dbt_schema_version', fieldErrorsOf(version.error.issues, 'body.manifest'));
  const declared = version.data.metadata.dbt_schema_version;
  const number = versionOf(declared);
  if (number === null || !SUPPORTED_VERSIONS.includes(number)) {
    throw problems.unprocessable(`unknown manifest schema version "${declared}": this import reads v${SUPPORTED_VERSIONS[0]} to v${SUPPORTED_VERSIONS.at(-1)} (dbt 1.3 and later)`, [
      { path: 'body.manifest.metadata.dbt_schema_version', message: 'unknown schema version' },
    ]);
  }
  const parsed = manifestShape.safeParse(manifest);
  if (!parsed.success) throw problems.badRequest('the manifest does not have the shape of a dbt manifest.json', fieldErrorsOf(parsed.error.issues.slice(0, 10), 'body.manifest'));
  const { metadata, nodes, sources } = parsed.data;
  // dbt keys each node by its unique_id: one written otherwise would make two resources of one id.
  for (const [section, entries] of [['nodes', nodes], ['sources', sources]] as const) {
    for (const [key, n] of Object.entries(entries)) {
      if (n.unique_id !== key) throw problems.badRequest(`the manifest's ${section} entry "${key}" has the unique_id "${n.unique_id}"`, [{ path: `body.manifest.${section}.${key}.unique_id`, message: 'must be the key of its entry' }]);
    }
  }
  const clash = Object.keys(sources).find((key) => key in nodes);
  if (clash !== undefined) throw problems.badRequest(`"${clash}" is both a node and a source`, [{ path: `body.manifest.sources.${clash}`, message: 'also a node' }]);
  const resources: DbtResource[] = [];
  const tests: DbtTest[] = [];
  const ignored: DbtProject['ignored'] = [];
  for (const n of [...Object.values(nodes), ...Object.values(sources)]) {
    if (n.resource_type === 'test') {
      const meta = n.test_metadata;
      tests.push({
        uniqueId: n.unique_id,
        testName: meta?.name ?? null,
        namespace: meta?.namespace ?? null,
        kwargs: meta?.kwargs ?? {},
        // Before v10 a test names what it tests only through its dependencies.
        attachedNode: n.attached_node ?? n.depends_on?.nodes?.at(-1) ?? null,
        columnName: n.column_name ?? (typeof meta?.kwargs?.column_name === 'string' ? meta.kwargs.column_name : null),
      });
    } else if ((DATASET_RESOURCES as readonly string[]).includes(n.resource_type)) {
      const relation = (n.resource_type === 'source' ? n.identifier : n.alias) || n.name;
      resources.push({
        uniqueId: n.unique_id,
        resourceType: n.resource_type as DatasetResourceType,
        packageName: n.package_name ?? '',
        name: n.name,
        relation,
        sourceName: n.source_name ?? null,
        description: n.description ?? '',
        columns: Object.values(n.columns ?? {}).map((c) => ({ name: c.name, description: c.description ?? '', dataType: c.data_type ?? null })),
        relationNames: n.relation_name ? [n.relation_name] : relationSpellings([n.database, n.schema, relation]),
        dependsOn: n.depends_on?.nodes ?? [],
        language: n.language ?? 'sql',
        rawCode: n.raw_code ?? null,
        compiledCode: n.compiled_code ?? null,
        columnTypes: Object.fromEntries(Object.entries(n.config?.column_types ?? {}).filter((e): e is [string, string] => typeof e[1] === 'string')),
      });
    } else {
      ignored.push({ unique_id: n.unique_id, reason: `a ${n.resource_type} is not imported (models, seeds, snapshots and sources are)` });
    }
  }
  for (const id of Object.keys(parsed.data.unit_tests)) ignored.push({ unique_id: id, reason: 'a unit test is not imported: no rule type checks given rows against expected rows' });
  for (const snapshot of resources.filter((r) => r.resourceType === 'snapshot')) {
    ignored.push({ unique_id: snapshot.uniqueId, reason: 'a snapshot becomes a dataset without a recipe: the history it keeps is dbt\'s (load its data)' });
  }
  resources.sort((a, b) => (a.uniqueId < b.uniqueId ? -1 : a.uniqueId > b.uniqueId ? 1 : 0));
  tests.sort((a, b) => (a.uniqueId < b.uniqueId ? -1 : 1));
  return { schemaVersion: number, dbtVersion: metadata.dbt_version ?? null, projectName: metadata.project_name ?? null, resources, tests, ignored };
}

const catalogShape = z.looseObject({
  nodes: z.record(z.string(), z.looseObject({ columns: z.record(z.string(), z.looseObject({ name: text, type: text.nullish() })) })).default({}),
  sources: z.record(z.string(), z.looseObject({ columns: z.record(z.string(), z.looseObject({ name: text, type: text.nullish() })) })).default({}),
});

/** catalog.json as column types by resource: unique_id → column name → the warehouse's type. */
export function readCatalog(catalog: unknown): Map<string, Map<string, string>> {
  const parsed = catalogShape.safeParse(catalog);
  if (!parsed.success) throw problems.badRequest('the catalog does not have the shape of a dbt catalog.json', fieldErrorsOf(parsed.error.issues.slice(0, 10), 'body.catalog'));
  const types = new Map<string, Map<string, string>>();
  for (const [id, entry] of [...Object.entries(parsed.data.nodes), ...Object.entries(parsed.data.sources)]) {
    types.set(id, new Map(Object.values(entry.columns).filter((c) => c.type).map((c) => [c.name, c.type!])));
  }
  return types;
}
