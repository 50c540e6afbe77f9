/**
 * API Service endpoints as a service declares them (spec §2.5): the config schema of each kind,
 * and the checks at save that need the organization's data (the dataset and its columns, the SQL
 * statement). Every refusal names its field as `body.endpoints.<i>.config.<path>`.
 */
import { HttpProblem, identitySchemas as s, problems, z, type FieldError } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog, DatasetInfo } from '../datasets/public.ts';
import type { RegistryModels } from '../registry/public.ts';
import { QUERY_TIMED_OUT, type GovernedSql } from '../sql/public.ts';
import { INPUT_TYPES, MAX_INPUT_TEXT, notReservedName, RESERVED_NAME_MESSAGE, typedInput } from './inputs.ts';

export const ENDPOINT_KINDS = ['sql', 'lookup', 'model', 'function'] as const;
export const ON_MULTIPLE = ['all', 'first', 'error'] as const;
/** Rows one SQL endpoint answers at most (as POST /api/sql). */
export const MAX_SQL_ROWS = 10_000;
/** Rows one key of a lookup answers at most (a page of GET /api/datasets/{id}/rows). */
export const MAX_ROWS_PER_KEY = 1000;

const endpointName = z.string().regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'must be 1 to 63 lower-case letters, digits, _ or -, starting with a letter or a digit');
const inputName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/, 'must be a name of letters, digits and _, not starting with a digit (at most 63)')
  .refine(notReservedName, RESERVED_NAME_MESSAGE);
const columnName = z.string().min(1).max(200);
const cacheTtl = z
  .number()
  .int()
  .min(0)
  .max(86_400)
  .default(0)
  .describe('Seconds an answer is kept and served again for the same inputs (0: never); a change of the data read, or of the publisher\u2019s row policies, is never served stale');
const scalar = z.union([z.string().max(MAX_INPUT_TEXT), z.number(), z.boolean(), z.null()]);
const unmaskedColumns = z
  .array(columnName)
  .max(200)
  .default([])
  .describe('PII columns answered in clear, when the publisher holds datasets.pii.read; every other PII column reads ***');

const sqlConfig = z
  .object({
    query: z.string().min(1).max(100_000).describe("One SELECT over the organization's datasets; $1, $2, … are the params in the order declared"),
    params: z
      .array(z.object({ name: inputName, type: z.enum(INPUT_TYPES), required: z.boolean().default(false), default: scalar.optional() }).strict())
      .max(50)
      .default([]),
    max_rows: z.number().int().min(1).max(MAX_SQL_ROWS).default(1000),
    unmasked_columns: unmaskedColumns,
    cache_ttl_s: cacheTtl,
  })
  .strict();

const lookupConfig = z
  .object({
    dataset_id: s.recordId,
    keys: z.array(columnName.refine(notReservedName, RESERVED_NAME_MESSAGE)).min(1).max(8).describe('The columns a key is made of: each call gives a value for each (a fixed parameter fills one in)'),
    columns: z.array(columnName).min(1).max(500).optional().describe('The columns answered; default all'),
    filters: z.array(z.string().min(1).max(MAX_INPUT_TEXT)).max(50).default([]).describe('`column:operator:value` conditions every answered row meets (the language of GET …/rows)'),
    on_multiple: z.enum(ON_MULTIPLE).default('all').describe('Rows matching one key: `all` (up to max_rows_per_key), `first` (in row order), `error` (409)'),
    max_rows_per_key: z.number().int().min(1).max(MAX_ROWS_PER_KEY).default(100),
    unmasked_columns: unmaskedColumns,
    cache_ttl_s: cacheTtl,
  })
  .strict();

const modelConfig = z.object({ model_id: s.recordId, version: z.number().int().positive().optional() }).strict();

/** A `function` endpoint is declared only (calling it answers 501): its config is kept as given. */
const functionConfig = z.record(z.string(), z.unknown()).default({});

export const endpointSchema = z
  .discriminatedUnion('kind', [
    z.object({ name: endpointName, kind: z.literal('sql'), config: sqlConfig }).strict(),
    z.object({ name: endpointName, kind: z.literal('lookup'), config: lookupConfig }).strict(),
    z.object({ name: endpointName, kind: z.literal('model'), config: modelConfig }).strict(),
    z.object({ name: endpointName, kind: z.literal('function'), config: functionConfig }).strict(),
  ])
  .meta({ id: 'ApiServiceEndpoint' });

export const endpointsSchema = z
  .array(endpointSchema)
  .min(1)
  .max(50)
  .superRefine((endpoints, ctx) => {
    const seen = new Set<string>();
    endpoints.forEach((endpoint, i) => {
      if (seen.has(endpoint.name)) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `another endpoint is named "${endpoint.name}"` });
      seen.add(endpoint.name);
    });
  });

export type Endpoint = z.output<typeof endpointSchema>;
export type SqlEndpoint = Extract<Endpoint, { kind: 'sql' }>;
export type LookupEndpoint = Extract<Endpoint, { kind: 'lookup' }>;
export type ModelEndpoint = Extract<Endpoint, { kind: 'model' }>;

/** The dataset a lookup reads, or a 422 naming its `dataset_id`. */
export async function lookupDataset(catalog: DatasetCatalog, orgId: number, endpoint: LookupEndpoint, at: string): Promise<DatasetInfo> {
  try {
    return await catalog.get(orgId, endpoint.config.dataset_id);
  } catch (err) {
    if (err instanceof HttpProblem && err.status === 404) {
      const path = `${at}.config.dataset_id`;
      throw problems.unprocessable(`${path}: no dataset ${endpoint.config.dataset_id} in this organization`, [{ path, message: 'no such dataset' }]);
    }
    throw err;
  }
}

export interface EndpointCheckDeps {
  catalog: DatasetCatalog;
  sql: GovernedSql;
  models: RegistryModels;
}

/** Checks each endpoint against the organization's data; the first refusal names its field. */
export async function checkEndpoints(endpoints: Endpoint[], orgId: number, deps: EndpointCheckDeps): Promise<void> {
  for (const [i, endpoint] of endpoints.entries()) {
    const at = `body.endpoints.${i}`;
    if (endpoint.kind === 'sql') await checkSql(endpoint, orgId, at, deps);
    if (endpoint.kind === 'lookup') checkLookup(endpoint, await lookupDataset(deps.catalog, orgId, endpoint, at), at, deps.catalog);
    if (endpoint.kind === 'model') await checkModel(endpoint, orgId, at, deps.models);
  }
}

/**
 * A model endpoint names a model of the organization's registry, or a 422 naming its `model_id`;
 * a pinned `version` must exist and be ready (trained or imported), or a 422 naming it.
 */
async function checkModel(endpoint: ModelEndpoint, orgId: number, at: string, models: RegistryModels): Promise<void> {
  const { model_id: modelId, version } = endpoint.config;
  if (!(await models.find(orgId, modelId))) {
    const path = `${at}.config.model_id`;
    throw problems.unprocessable(`${path}: no model ${modelId} in this organization`, [{ path, message: 'no such model' }]);
  }
  if (version === undefined) return;
  // The registry's own check of a version to predict with: a 409 when missing or not ready.
  await models.signature(orgId, modelId, version).catch((err: unknown) => {
    if (!(err instanceof HttpProblem) || err.status !== 409) throw err;
    const path = `${at}.config.version`;
    throw problems.unprocessable(`${path}: ${err.detail}`, [{ path, message: err.detail }]);
  });
}

const refuse = (path: string, message: string) => problems.badRequest(`${path}: ${message}`, [{ path, message }] satisfies FieldError[]);

async function checkSql(endpoint: SqlEndpoint, orgId: number, at: string, { catalog, sql }: EndpointCheckDeps): Promise<void> {
  const names = new Set<string>();
  for (const [j, param] of endpoint.config.params.entries()) {
    if (names.has(param.name)) throw refuse(`${at}.config.params.${j}.name`, `another parameter is named "${param.name}"`);
    names.add(param.name);
    if (param.default !== undefined) typedInput(param.type, param.default, 'body', `${at}.config.params.${j}.default`, catalog.parseValue);
  }
  // Described as governed SQL would run it, each parameter bound to null: refused as /api/sql refuses
  // it (not one SELECT, no such dataset, a $n without its parameter), or taking too long to describe
  // (SQLite runs a query to its first row).
  try {
    await sql.describe({ sql: endpoint.config.query, params: endpoint.config.params.map(() => null) }, orgId);
  } catch (err) {
    if (err instanceof HttpProblem && (err.status === 400 || err.title === QUERY_TIMED_OUT)) throw refuse(`${at}.config.query`, err.detail);
    throw err;
  }
}

function checkLookup(endpoint: LookupEndpoint, dataset: DatasetInfo, at: string, catalog: DatasetCatalog): void {
  const { config } = endpoint;
  const columns = new Map(dataset.columns.map((c) => [c.name, c]));
  const column = (name: string, path: string) => {
    const found = columns.get(name);
    if (!found) throw refuse(path, `dataset "${dataset.name}" has no column "${name}"`);
    return found;
  };
  config.unmasked_columns.forEach((name, j) => column(name, `${at}.config.unmasked_columns.${j}`));
  config.columns?.forEach((name, j) => column(name, `${at}.config.columns.${j}`));
  config.keys.forEach((name, j) => {
    const key = column(name, `${at}.config.keys.${j}`);
    if (key.type === 'json') throw refuse(`${at}.config.keys.${j}`, `column "${name}" holds JSON: a key column must hold one value`);
    // Looking up by a PII column would tell a caller which values exist, one guess at a time.
    if (key.pii && !config.unmasked_columns.includes(name)) throw refuse(`${at}.config.keys.${j}`, `column "${name}" holds personal data: list it in unmasked_columns to look rows up by it`);
  });
  if (new Set(config.keys).size !== config.keys.length) throw refuse(`${at}.config.keys`, 'a column may be named once');
  config.filters.forEach((filter, j) => catalog.condition(dataset.columns, filter, `${at}.config.filters.${j}`));
}
