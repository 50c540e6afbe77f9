/**
 * GET /api/service/{key}/openapi.json: the OpenAPI 3.1 description of a published API Service as
 * one data API key may call it, for generating clients: the endpoints of its `allowed_endpoints`,
 * without the inputs its `fixed_params` lock, inputs and answers typed from each endpoint's config
 * (SQL parameters, the dataset's columns, the model's features, governed SQL's description of a
 * query's result), PII columns typed as the publisher's rights and `unmasked_columns` answer them.
 */
import { HttpProblem, type ApiKeyPrincipal, type Delegation } from '../../kernel/plugin-api.ts';
import { PII_MASK, type DatasetCatalog } from '../datasets/public.ts';
import type { RegistryModels } from '../registry/public.ts';
import type { GovernedSql } from '../sql/public.ts';
import type { DataColumnType } from '../../storage/index.ts';
import { publisherOf, serviceOfKey, type CallDeps } from './calls.ts';
import { type Endpoint, type LookupEndpoint, type ModelEndpoint, type SqlEndpoint } from './endpoints.ts';
import type { FixedParams } from './key-store.ts';
import { MAX_INPUT_TEXT } from './inputs.ts';
import { MAX_BATCH_KEYS } from './lookup-endpoint.ts';

type Schema = Record<string, unknown>;
type Operation = Record<string, unknown>;

export interface DocumentDeps extends Pick<CallDeps, 'services' | 'keys'> {
  delegation: Delegation;
  catalog: DatasetCatalog;
  sql: GovernedSql;
  models: RegistryModels;
}

/** A value of each type as JSON carries it (dates and timestamps as ISO 8601 text; json any value). */
const TYPE_SCHEMAS: Record<DataColumnType, Schema> = {
  string: { type: 'string' },
  integer: { type: 'integer' },
  number: { type: 'number' },
  boolean: { type: 'boolean' },
  date: { type: 'string', format: 'date' },
  timestamp: { type: 'string', format: 'date-time' },
  json: {},
};

/** A value of a type, or an input of it: a text input is at most MAX_INPUT_TEXT characters, without a NUL (as calls check it). */
const valueSchema = (type: DataColumnType, input = false): Schema => ({ ...TYPE_SCHEMAS[type], ...(input && TYPE_SCHEMAS[type].type === 'string' ? TEXT_INPUT : {}) });
const TEXT_INPUT = { maxLength: MAX_INPUT_TEXT, pattern: '^[^\\u0000]*$' };
/** A value a query string sends. */
const queryInput = (type: DataColumnType): Schema => valueSchema(type, true);
/** A value a JSON body sends: of its type, or null. */
const bodyInput = (type: DataColumnType): Schema => (type === 'json' ? {} : { ...valueSchema(type, true), type: [TYPE_SCHEMAS[type].type, 'null'] });
/** A value an answer holds: of its type, or null. */
const nullableSchema = (type: DataColumnType): Schema => (type === 'json' ? {} : { ...TYPE_SCHEMAS[type], type: [TYPE_SCHEMAS[type].type, 'null'] });
const MASKED_SCHEMA: Schema = { enum: [PII_MASK, null], description: `Personal data, masked: ${PII_MASK}` };

const PROBLEM = '#/components/schemas/Problem';
const problem = (description: string) => ({ description, content: { 'application/problem+json': { schema: { $ref: PROBLEM } } } });
const json = (schema: Schema) => ({ 'application/json': { schema } });
const KEY_ERRORS = {
  401: problem('No data API key, or one unknown, revoked or expired'),
  403: problem('A key of another service, an endpoint outside the key\u2019s allowed_endpoints, or a publisher who may not read any more'),
  404: problem('The service is not published any more, or the endpoint is gone'),
  429: problem('Over the key\u2019s rate (`Retry-After` says when to retry)'),
};
const CALL_ERRORS = { 400: problem('An input that does not fit, named in `errors`'), ...KEY_ERRORS };

const object = (properties: Record<string, Schema>, required: string[]): Schema => ({ type: 'object', properties, required, additionalProperties: false });
const rowsOf = (row: Schema): Schema => ({ type: 'array', items: row });

/** A column answered as the endpoint answers it: masked unless listed in unmasked_columns and the publisher sees PII. */
function columnSchema(column: { type: DataColumnType; pii: boolean; name: string }, unmasked: readonly string[], seesPii: boolean): Schema {
  return column.pii && !(seesPii && unmasked.includes(column.name)) ? MASKED_SCHEMA : nullableSchema(column.type);
}

/** The answer of a `sql` endpoint, its rows typed from governed SQL's description of the query (PII masked as a call masks it). */
async function sqlOperations(endpoint: SqlEndpoint, fixed: FixedParams, orgId: number, seesPii: boolean, sql: GovernedSql): Promise<Record<string, Operation> | null> {
  const { config } = endpoint;
  if (Object.keys(fixed).some((name) => !config.params.some((p) => p.name === name))) return null;
  const params = config.params.filter((p) => !Object.hasOwn(fixed, p.name));
  const inputSchema = (p: (typeof params)[number], schema: typeof queryInput) => ({ ...schema(p.type), ...(p.default !== undefined ? { default: p.default } : {}) });
  // A declared default stands in for a missing input: only a required input without one must be sent.
  const required = params.filter((p) => p.required && p.default === undefined).map((p) => p.name);
  const answer = object(
    {
      columns: { type: 'array', items: object({ name: { type: 'string' }, type: { type: 'string' } }, ['name', 'type']) },
      rows: rowsOf(await sqlRow(config, orgId, seesPii, sql)),
      row_count: { type: 'integer' },
      truncated: { type: 'boolean', description: `More rows matched than max_rows (${config.max_rows}) answered` },
    },
    ['columns', 'rows', 'row_count', 'truncated'],
  );
  const responses = { 200: { description: 'The rows', content: json(answer) }, ...CALL_ERRORS };
  return {
    get: { summary: `Run ${endpoint.name} with inputs in the query string`, parameters: params.map((p) => ({ name: p.name, in: 'query', required: required.includes(p.name), schema: inputSchema(p, queryInput) })), responses },
    post: {
      summary: `Run ${endpoint.name} with inputs in a JSON body`,
      requestBody: { required: true, content: json(object(Object.fromEntries(params.map((p) => [p.name, inputSchema(p, bodyInput)])), required)) },
      responses,
    },
  };
}

/** A row of a `sql` endpoint's answer, as governed SQL describes the query; untyped when it no longer describes (a dataset gone: calls answer 400 too). */
async function sqlRow(config: SqlEndpoint['config'], orgId: number, seesPii: boolean, sql: GovernedSql): Promise<Schema> {
  try {
    const columns = await sql.describe({ sql: config.query, params: config.params.map(() => null), unmasked: seesPii ? config.unmasked_columns : [] }, orgId);
    return object(Object.fromEntries(columns.map((c) => [c.name, nullableSchema(c.type)])), columns.map((c) => c.name));
  } catch (err) {
    if (err instanceof HttpProblem && err.status === 400) return { type: 'object', description: `The query does not describe any more: ${err.detail}` };
    throw err;
  }
}

/** A `lookup` endpoint: one key (query string or JSON body) or a batch, rows typed from the dataset's columns answered; none when its dataset is gone (calls answer 422). */
async function lookupOperations(endpoint: LookupEndpoint, fixed: FixedParams, orgId: number, seesPii: boolean, catalog: DatasetCatalog): Promise<Record<string, Operation> | null> {
  const { config } = endpoint;
  const dataset = await Promise.resolve(catalog.get(orgId, config.dataset_id)).catch((err) => {
    // A dataset gone: calls answer 422, and there are no columns to describe.
    if (err instanceof HttpProblem && err.status === 404) return null;
    throw err;
  });
  if (!dataset) return null;
  const columns = new Map(dataset.columns.map((c) => [c.name, c]));
  if (Object.keys(fixed).some((name) => !columns.has(name))) return null;
  const keyColumns = config.keys.filter((name) => !Object.hasOwn(fixed, name)).flatMap((name) => columns.get(name) ?? []);
  const key = object(Object.fromEntries(keyColumns.map((c) => [c.name, bodyInput(c.type)])), keyColumns.map((c) => c.name));
  const answered = config.columns ? config.columns.flatMap((name) => columns.get(name) ?? []) : dataset.columns;
  const row = object(Object.fromEntries(answered.map((c) => [c.name, columnSchema(c, config.unmasked_columns, seesPii)])), answered.map((c) => c.name));
  const answerOf = (sent: Schema) => object({ key: sent, rows: rowsOf(row) }, ['key', 'rows']);
  const one = answerOf(key);
  // A GET's answer echoes its key as the query string sent it: text.
  const sentAsText = object(Object.fromEntries(keyColumns.map((c) => [c.name, { type: 'string' }])), keyColumns.map((c) => c.name));
  const batch = object({ keys: { type: 'array', items: key, minItems: 1, maxItems: MAX_BATCH_KEYS } }, ['keys']);
  const batchAnswer = object({ results: { type: 'array', items: one, description: 'One per key, in input order' } }, ['results']);
  const errors = { ...CALL_ERRORS, ...(config.on_multiple === 'error' ? { 409: problem('More than one row matches a key') } : {}) };
  return {
    get: {
      summary: `Look up one key of ${endpoint.name} in the query string`,
      parameters: keyColumns.map((c) => ({ name: c.name, in: 'query', required: true, schema: queryInput(c.type) })),
      responses: { 200: { description: 'The rows of the key', content: json(answerOf(sentAsText)) }, ...errors },
    },
    post: {
      summary: `Look up one key, or a batch of keys, of ${endpoint.name} in a JSON body`,
      requestBody: { required: true, content: json({ oneOf: [key, batch] }) },
      responses: { 200: { description: 'The rows of the key, or of each key of the batch', content: json({ oneOf: [one, batchAnswer] }) }, ...errors },
    },
  };
}

/** A `model` endpoint: POST {rows} of its version's features (untyped while the model has no ready version: calls answer 409). */
async function modelOperations(endpoint: ModelEndpoint, fixed: FixedParams, orgId: number, models: RegistryModels): Promise<Record<string, Operation> | null> {
  if (Object.keys(fixed).length > 0) return null;
  let row: Schema = { type: 'object', description: 'The model has no ready version yet: calls answer 409' };
  try {
    const { features } = await models.signature(orgId, endpoint.config.model_id, endpoint.config.version ?? null);
    row = object(Object.fromEntries(features.map((f) => [f.name, valueSchema(f.type)])), features.map((f) => f.name));
  } catch (err) {
    if (!(err instanceof HttpProblem && (err.status === 404 || err.status === 409))) throw err;
  }
  const answer = object(
    {
      predictions: { type: 'array', items: {}, description: 'One per row, in input order' },
      probabilities: { type: 'array', items: { type: 'object', additionalProperties: { type: 'number' } }, description: 'A classifier\u2019s probability of each class, per row' },
      version: { type: 'integer', description: 'The model version that answered' },
    },
    ['predictions', 'version'],
  );
  return {
    post: {
      summary: `Predict with ${endpoint.name}`,
      requestBody: { required: true, content: json(object({ rows: { type: 'array', items: row, minItems: 1 } }, ['rows'])) },
      responses: { 200: { description: 'The predictions', content: json(answer) }, ...CALL_ERRORS, 409: problem('The model has no ready version') },
    },
  };
}

/** A `function` endpoint is declared only: every call answers 501. */
function functionOperations(endpoint: Endpoint): Record<string, Operation> {
  const responses = { 501: problem('Declared, not callable yet'), ...KEY_ERRORS };
  return { get: { summary: `${endpoint.name} (declared, not callable yet)`, responses }, post: { summary: `${endpoint.name} (declared, not callable yet)`, responses } };
}

const DESCRIPTIONS: Record<Endpoint['kind'], string> = {
  sql: 'A governed, parameterized query: inputs typed and bound.',
  lookup: 'Rows of a dataset by key: one key in the query string or a JSON body, or a batch `{keys: […]}` answered in input order.',
  model: 'Predictions of a model: inline rows of its features in, predictions out.',
  function: 'Declared only: calling it answers 501.',
};

/**
 * The operations (get, post) of one endpoint for a caller whose inputs `fixed` locks, reading with
 * rights that do or do not see PII in clear; null when `fixed` names an input the endpoint does not take.
 */
export async function endpointOperations(deps: Omit<DocumentDeps, 'services' | 'keys' | 'delegation'>, endpoint: Endpoint, fixed: FixedParams, orgId: number, seesPii: boolean): Promise<Record<string, Operation> | null> {
  const operations =
    endpoint.kind === 'sql'
      ? await sqlOperations(endpoint, fixed, orgId, seesPii, deps.sql)
      : endpoint.kind === 'lookup'
        ? await lookupOperations(endpoint, fixed, orgId, seesPii, deps.catalog)
        : endpoint.kind === 'model'
          ? await modelOperations(endpoint, fixed, orgId, deps.models)
          : functionOperations(endpoint);
  for (const [method, operation] of Object.entries(operations ?? {})) {
    Object.assign(operation, { operationId: `${method}_${endpoint.name}`, description: `${DESCRIPTIONS[endpoint.kind]} Endpoint \`${endpoint.name}\` (${endpoint.kind}).` });
  }
  return operations;
}

/** The document of the service `serviceKey` as the key `principal` sees it; refusals are the calls' (404, 403). */
export function serviceDocuments(deps: DocumentDeps) {
  return async (serviceKey: string, principal: ApiKeyPrincipal): Promise<Record<string, unknown>> => {
    const { service, key } = await serviceOfKey(deps, serviceKey, principal);
    const publisher = await publisherOf(deps.delegation, service.publisher, principal.orgId);
    const seesPii = deps.catalog.seesPii(publisher);
    const paths: Record<string, Record<string, Operation>> = {};
    for (const endpoint of service.endpoints) {
      if (principal.allowed && !principal.allowed.has(endpoint.name)) continue;
      const operations = await endpointOperations(deps, endpoint, key.fixed_params, principal.orgId, seesPii);
      // An endpoint the key's fixed parameters do not apply to refuses the key (403): not listed.
      if (operations) paths[`/${endpoint.name}`] = operations;
    }
    return {
      openapi: '3.1.0',
      info: { title: service.name, version: service.updated_at, description: `API Service \`${service.key}\`, as this data API key may call it. Send the key as \`X-API-Key\`; errors are RFC 9457 problems.` },
      servers: [{ url: `/api/service/${service.key}` }],
      security: [{ apiKey: [] }],
      paths,
      components: {
        securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'A data API key (dpk_…) of this service' } },
        schemas: {
          Problem: {
            type: 'object',
            description: 'RFC 9457 problem details',
            properties: {
              type: { type: 'string' },
              title: { type: 'string' },
              status: { type: 'integer' },
              detail: { type: 'string' },
              request_id: { type: 'string' },
              errors: { type: 'array', items: object({ path: { type: 'string' }, message: { type: 'string' } }, ['path', 'message']), description: 'Each failing input, e.g. `query.region`' },
            },
            required: ['type', 'title', 'status', 'detail'],
          },
        },
      },
    };
  };
}
