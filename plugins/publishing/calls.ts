import { andThen, problems, type ApiKeyPrincipal, type Maybe, type Delegation, type Principal, type RateLimits, type RequestAudit, type StoredActor } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog } from '../datasets/public.ts';
import type { RegistryModels } from '../registry/public.ts';
import type { GovernedSql } from '../sql/public.ts';
import type { AnswerCache } from './answer-cache.ts';
import { lookupDataset, type Endpoint } from './endpoints.ts';
import type { KeyRecord, KeyStore } from './key-store.ts';
import { runLookupEndpoint } from './lookup-endpoint.ts';
import { runModelEndpoint } from './model-endpoint.ts';
import type { ApiService, ServiceStore } from './service-store.ts';
import type { CallInput, EndpointContext } from './call-input.ts';
import type { CountableCall } from './usage.ts';
import { runSqlEndpoint } from './sql-endpoint.ts';

export interface CallDeps {
  services: ServiceStore;
  keys: KeyStore;
  delegation: Delegation;
  rateLimits: RateLimits;
  run: EndpointRunner;
  answers: AnswerCache;
}

/** What the endpoints read through. */
export interface RunnerDeps {
  catalog: DatasetCatalog;
  sql: GovernedSql;
  models: RegistryModels;
  /** How long a `sql` endpoint's query may run (`API_SERVICE_SQL_TIMEOUT_MS`). */
  sqlTimeoutMs: number;
}

/** Runs one endpoint with `context`'s rights and locked inputs: a call's (its publisher's, its key's) or a dry run's (the caller's). */
export type EndpointRunner = (endpoint: Endpoint, input: CallInput, context: EndpointContext) => Promise<unknown>;

const notCallable = (endpoint: Endpoint) => problems.notImplemented(`the endpoint "${endpoint.name}" is a function: declared, not callable yet`);

export function endpointRunner(deps: RunnerDeps): EndpointRunner {
  return async (endpoint, input, context) => {
    if (endpoint.kind === 'function') throw notCallable(endpoint);
    if (endpoint.kind === 'sql') return runSqlEndpoint(endpoint, input, context, deps);
    if (endpoint.kind === 'model') return runModelEndpoint(endpoint, input, context, deps.models);
    const dataset = await lookupDataset(deps.catalog, context.orgId, endpoint, `endpoints.${endpoint.name}`);
    return runLookupEndpoint(endpoint, dataset, input, context, deps.catalog);
  };
}

/** One call on the service path: which endpoint of which service, by whom, with what. */
export interface EndpointCall {
  serviceKey: string;
  endpoint: string;
  principal: ApiKeyPrincipal;
  input: CallInput;
  audit: RequestAudit;
}

/** The principal the endpoints of a service read with: its publisher's rights of now (narrowed to the scopes they published with), or a 403 saying why not. */
export function publisherOf(delegation: Delegation, actor: StoredActor, orgId: number): Maybe<Principal> {
  return andThen(delegation.actFor(actor.userId, orgId, actor.scopes), (publisher) => {
    if ('refused' in publisher) throw problems.forbidden(`this API Service reads with the rights of the user who published it, and that user may not read any more: ${publisher.refused}`);
    if (!publisher.capabilities.has('datasets.read')) {
      throw problems.forbidden(`this API Service reads with the rights of the user who published it, and ${publisher.username} no longer holds the capability "datasets.read"`);
    }
    return publisher;
  });
}

/** A published service as a key of it reaches it: with its publisher. */
export type KeyedService = { service: ApiService & { publisher: StoredActor }; key: KeyRecord };

/**
 * The published service `serviceKey` as the data API key `principal` reaches it (a call, or its
 * openapi.json): a service not published, or not of the key's organization, is not there (404); a
 * key of another service, or one its publisher of now did not mint, is refused (403).
 */
export function serviceOfKey(deps: Pick<CallDeps, 'services' | 'keys'>, serviceKey: string, principal: ApiKeyPrincipal): Maybe<KeyedService> {
  return andThen(deps.services.byKey(serviceKey), (service) => {
    if (!service || service.status !== 'published' || service.org_id !== principal.orgId || service.publisher === null) throw problems.notFound(`no published API Service "${serviceKey}"`);
    const publisher = service.publisher;
    return andThen(deps.keys.callerOf(principal.orgId, Number(principal.keyId)), (key) => {
      if (!key || key.service_id !== service.id) throw problems.forbidden(`this API key belongs to another API Service than "${serviceKey}"`);
      // A key reads with its minter's rights only: published again by someone else, the service would
      // lend the new publisher's rights to keys that user never handed out.
      if (key.minted_by !== publisher.userId) throw problems.forbidden(`this API key was minted by a user who no longer publishes "${serviceKey}" (it was published again by another user): its publisher mints new keys`);
      return { service: service as KeyedService['service'], key };
    });
  });
}

/**
 * Serves GET|POST /api/service/{key}/{endpoint} (spec §4, §5.14). A service that is not published,
 * or not of the key's organization, is not there (404); a key of another service or an endpoint
 * outside its `allowed_endpoints`, existing or not, is refused (403); then the key's rate, then the endpoint runs
 * with the publisher's rights, checked again on every call. Every step reads from memory when it
 * can, so a cached answer is at hand without a promise.
 */
export function endpointCalls(deps: CallDeps): CountableCall {
  return (call, found) =>
    andThen(serviceOfKey(deps, call.serviceKey, call.principal), (keyed) => {
      // From here the call counts in the service's usage (usage.ts), whatever it answers.
      found.service = keyed.service;
      return callEndpoint(deps, call, keyed);
    });
}

function callEndpoint(deps: CallDeps, { endpoint: name, serviceKey, principal, input, audit }: EndpointCall, { service, key }: KeyedService): Maybe<unknown> {
  // Checked before the endpoint is looked up: a key learns nothing of the endpoints outside its list.
  if (principal.allowed && !principal.allowed.has(name)) throw problems.forbidden(`this API key may not call the endpoint "${name}" (allowed_endpoints)`);
  const endpoint = service.endpoints.find((e) => e.name === name);
  if (!endpoint) throw problems.notFound(`API Service "${serviceKey}" has no endpoint "${name}"`);
  const limited =
    key.rate_limit_per_min === null
      ? undefined
      : deps.rateLimits.take(principal, { name: 'publishing.key', limit: key.rate_limit_per_min, windowMs: 60_000, detail: `this API key may make ${key.rate_limit_per_min} calls a minute; retry later` });
  return andThen(limited, () => {
    if (endpoint.kind === 'function') throw notCallable(endpoint);
    return andThen(publisherOf(deps.delegation, service.publisher, principal.orgId), (publisher) => {
      const context = { orgId: principal.orgId, publisher, fixed: key.fixed_params, audit };
      return deps.answers.answer(service, endpoint, input, context, () => deps.run(endpoint, input, context));
    });
  });
}
