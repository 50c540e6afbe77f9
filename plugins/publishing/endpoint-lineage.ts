/**
 * What API Service endpoints read, for lineage impact (`lineage.consumers`): a lookup reads its
 * dataset's key, answered, filtered and key-fixed columns; a `sql` endpoint the datasets and columns
 * its query reads; a model endpoint reads no dataset when called.
 */
import { HttpProblem } from '../../kernel/plugin-api.ts';
import { parsePostgresSelect } from '../../storage/index.ts';
import type { DatasetInfo } from '../datasets/public.ts';
import type { LineageConsumer, LineageConsumerSource } from '../lineage/public.ts';
import { sqlColumnOrigins } from '../recipes/sql-lineage.ts';
import type { GovernedSql } from '../sql/public.ts';
import type { Endpoint, LookupEndpoint, SqlEndpoint } from './endpoints.ts';
import type { KeyStore } from './key-store.ts';
import type { ApiService, ServiceStore } from './service-store.ts';

/** The columns an endpoint reads of each dataset it reads; `all` where only the dataset is known. */
type Reads = Map<number, Set<string> | 'all'>;

export interface EndpointLineageDeps {
  services: ServiceStore;
  keys: KeyStore;
  sql: GovernedSql;
}

/**
 * The endpoints of the organization's API Services, whatever their status (a draft or unpublished
 * service reads the same datasets once published), that read any of the columns asked about: each
 * a consumer of kind `api_service_endpoint` with the columns it reads among them.
 */
export function apiServiceConsumers({ services, keys, sql }: EndpointLineageDeps): LineageConsumerSource {
  return async (orgId, datasets) => {
    const asked = new Map(datasets.map((d) => [d.dataset_id, d.columns]));
    const among = new Set(asked.keys());
    const consumers: LineageConsumer[] = [];
    for (const service of await services.list(orgId)) {
      for (const endpoint of service.endpoints) {
        for (const [datasetId, read] of await readsOf(endpoint, service, orgId, among, { keys, sql })) {
          const columns = read === 'all' ? asked.get(datasetId) : asked.get(datasetId)?.filter((c) => read.has(c));
          if (!columns?.length) continue;
          const details = { service_id: service.id, key: service.key, endpoint: endpoint.name, status: service.status };
          consumers.push({ kind: 'api_service_endpoint', id: `${service.id}/${endpoint.name}`, name: `${service.key}/${endpoint.name}`, dataset_id: datasetId, columns, details });
        }
      }
    }
    return consumers;
  };
}

/** What the endpoint reads of the datasets `among` (a model or function endpoint reads none when called). */
async function readsOf(endpoint: Endpoint, service: ApiService, orgId: number, among: Set<number>, deps: Pick<EndpointLineageDeps, 'keys' | 'sql'>): Promise<Reads> {
  if (endpoint.kind === 'lookup' && among.has(endpoint.config.dataset_id)) return lookupReads(endpoint, await fixedColumns(endpoint, service, orgId, deps.keys));
  if (endpoint.kind === 'sql') return sqlReads(endpoint, orgId, among, deps.sql);
  return new Map();
}

/** The columns the service's usable keys that may call the endpoint fix: a lookup filters its rows on them. */
async function fixedColumns(endpoint: LookupEndpoint, service: ApiService, orgId: number, keys: KeyStore): Promise<string[]> {
  const callers = (await keys.list(orgId, service.id)).filter((k) => k.state === 'active' && (k.allowed_endpoints === null || k.allowed_endpoints.includes(endpoint.name)));
  return callers.flatMap((k) => Object.keys(k.fixed_params));
}

function lookupReads({ config }: LookupEndpoint, fixed: string[]): Reads {
  if (!config.columns) return new Map([[config.dataset_id, 'all']]);
  // A filter is `column:operator:value` (the language of GET …/rows): its column comes first.
  const filtered = config.filters.map((filter) => filter.split(':')[0]);
  return new Map([[config.dataset_id, new Set([...config.keys, ...config.columns, ...filtered, ...fixed])]]);
}

/**
 * The datasets the query reads (as governed SQL resolves them) and, where Postgres's parser reads
 * the query, their columns: those its result is computed from (the `sql` recipe's column lineage)
 * and every column it names elsewhere (WHERE, JOIN, GROUP BY, ORDER BY…), matched by name in every
 * dataset read, so a column is never missed. A query only SQLite reads (or one the database no
 * longer describes) is known by its datasets only.
 */
async function sqlReads(endpoint: SqlEndpoint, orgId: number, among: Set<number>, sql: GovernedSql): Promise<Reads> {
  const { query, params } = endpoint.config;
  let datasets: DatasetInfo[];
  try {
    datasets = await sql.reads({ sql: query }, orgId);
  } catch (err) {
    // A dataset it read by name was renamed or deleted: the endpoint reads nothing any more.
    if (err instanceof HttpProblem && err.status === 400) return new Map();
    throw err;
  }
  if (!datasets.some((d) => among.has(d.id))) return new Map();
  const whole: Reads = new Map(datasets.map((d) => [d.id, 'all']));
  let named: Set<string> | null;
  try {
    named = spelledColumns((await parsePostgresSelect(query)).statement);
  } catch {
    return whole;
  }
  const result = named && (await sql.describe({ sql: query, params: params.map(() => null) }, orgId).catch(() => null));
  if (!named || !result) return whole;
  const reads = new Map(datasets.map((d) => [d.id, new Set(d.columns.filter((c) => named.has(c.name.toLowerCase())).map((c) => c.name))]));
  for (const origin of await sqlColumnOrigins(query, datasets, result)) for (const from of origin.from) reads.get(datasets[from.input].id)!.add(from.column);
  return reads;
}

/**
 * The column names a parsed statement spells anywhere (lower-cased, as unquoted names fold), or
 * null when it joins NATURAL (reading columns it never names). Walked with a stack: no depth limit.
 */
function spelledColumns(statement: unknown): Set<string> | null {
  const names = new Set<string>();
  const stack: unknown[] = [statement];
  const sval = (node: unknown) => (node as { String?: { sval?: string } } | undefined)?.String?.sval;
  while (stack.length) {
    const node = stack.pop();
    if (Array.isArray(node)) {
      for (const item of node) stack.push(item);
      continue;
    }
    if (typeof node !== 'object' || node === null) continue;
    const { ColumnRef: ref, JoinExpr: join } = node as { ColumnRef?: { fields: unknown[] }; JoinExpr?: { isNatural?: boolean; usingClause?: unknown[] } };
    if (join?.isNatural) return null;
    for (const name of [sval(ref?.fields.at(-1)), ...(join?.usingClause ?? []).map(sval)]) if (name) names.add(name.toLowerCase());
    stack.push(...Object.values(node));
  }
  return names;
}
