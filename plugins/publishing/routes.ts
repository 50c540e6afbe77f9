import { defineRoute, identitySchemas as s, problems, reply, storedActorOf, z, type RouteDefinition, type UserPrincipal } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog } from '../datasets/public.ts';
import type { ProjectCatalog } from '../projects/public.ts';
import type { RegistryModels } from '../registry/public.ts';
import type { GovernedSql } from '../sql/public.ts';
import { checkEndpoints, endpointSchema, endpointsSchema, lookupDataset, type Endpoint } from './endpoints.ts';
import { checkKeyFields, keyInput } from './key-fields.ts';
import type { KeyRecord, KeyStore } from './key-store.ts';
import { SERVICE_STATUSES, type ApiService, type ServiceStore } from './service-store.ts';

const serviceKey = z
  .string()
  .regex(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/, 'must be 1 to 63 lower-case letters, digits or -, not starting or ending with - (the URL segment of /api/service/{key}/…)');

// Strict, as the key's fields: a misspelt field is a 400 naming it, never a change silently not made.
const serviceInput = z
  .object({
    project_id: s.recordId,
    name: s.displayName,
    key: serviceKey.describe('The URL segment of /api/service/{key}/{endpoint}, unique on the platform'),
    endpoints: endpointsSchema,
  })
  .strict();

const serviceSchema = z
  .object({
    id: z.number().int(),
    project_id: z.number().int(),
    name: z.string(),
    key: z.string(),
    asset_type: z.literal('api_service'),
    status: z.enum(SERVICE_STATUSES).describe('`draft` until first published; calls to a service that is not `published` answer 404'),
    endpoints: z.array(endpointSchema),
    published_by: z.number().int().nullable().describe('The user whose rights the endpoints read with'),
    published_at: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'ApiService' });

const keySchema = z
  .object({
    id: z.number().int(),
    service_id: z.number().int(),
    name: z.string(),
    key_prefix: z.string().describe('The first characters of the key, to recognize it'),
    minted_by: z.number().int().nullable().describe('The publisher who minted it: the key reads only while that user publishes the service'),
    allowed_endpoints: z.array(z.string()).nullable().describe('Endpoints the key may call; null: all'),
    fixed_params: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()])),
    rate_limit_per_min: z.number().int().nullable(),
    expires_at: z.string().nullable(),
    created_at: z.string(),
    last_used_at: z.string().nullable(),
    revoked_at: z.string().nullable(),
    state: z.enum(['active', 'revoked', 'expired']),
  })
  .meta({ id: 'DataApiKey' });

const publicService = ({ org_id: _org, created_by: _by, publisher, ...service }: ApiService) => ({ ...service, published_by: publisher?.userId ?? null, asset_type: 'api_service' as const });
const publicKey = ({ org_id: _org, ...key }: KeyRecord) => key;
const base = { security: 'bearer', orgScoped: true } as const;
const idParams = s.idParam('id');

export interface RouteDeps {
  services: ServiceStore;
  keys: KeyStore;
  catalog: DatasetCatalog;
  projects: ProjectCatalog;
  sql: GovernedSql;
  models: RegistryModels;
}

/** The `publishing` router's API Service routes: CRUD, publish and unpublish, data API keys. */
export function apiServiceRoutes({ services, keys, catalog, projects, sql, models }: RouteDeps): RouteDefinition<any>[] {
  const check = (orgId: number, endpoints: Endpoint[]) => checkEndpoints(endpoints, orgId, { catalog, sql, models });
  /** The indexes a published service's lookups read by. */
  const indexLookups = async (orgId: number, endpoints: Endpoint[]) => {
    for (const [i, endpoint] of endpoints.entries()) {
      if (endpoint.kind !== 'lookup') continue;
      const dataset = await lookupDataset(catalog, orgId, endpoint, `endpoints.${i}`);
      await catalog.index(orgId, dataset.id, endpoint.config.keys);
    }
  };
  const published = (service: ApiService) => service.status === 'published';
  /** Publishing, or changing what a published service reads, lends the caller's rights to its endpoints. */
  const mayLendRights = (principal: UserPrincipal) => {
    if (!principal.capabilities.has('datasets.read')) throw problems.forbidden('a published service reads with your rights to read datasets: this needs the capability "datasets.read"');
  };
  /** A key reads with the publisher's rights: only the publisher hands one out, nobody mints a key reading as someone else. */
  const mayMint = (service: ApiService, principal: UserPrincipal) => {
    if (service.publisher === null) throw problems.forbidden(`API Service "${service.key}" was never published: a data API key reads with its publisher's rights, so publish it first`);
    if (service.publisher.userId !== principal.userId) {
      throw problems.forbidden(`a data API key of "${service.key}" reads with the rights of its publisher (user ${service.publisher.userId}), so only they may mint one: publish it yourself to mint keys reading with your rights`);
    }
  };

  return [
    defineRoute({
      ...base,
      method: 'post',
      path: '/api-services',
      summary: 'Create an API Service',
      description: 'A draft: its endpoints answer once it is published, to callers holding one of its data API keys.',
      capability: 'publishing.write',
      request: { body: serviceInput },
      responses: { 201: { description: 'Created', schema: serviceSchema }, 409: { description: 'The key is taken' }, 422: { description: 'A project, dataset or model that does not exist here' } },
      handler: async ({ body, orgId, principal, audit }) => {
        if (!(await projects.exists(orgId, body.project_id))) throw problems.unprocessable(`project ${body.project_id} does not exist in this organization`, [{ path: 'body.project_id', message: 'no such project' }]);
        await check(orgId, body.endpoints);
        const service = await services.create(orgId, body, principal.userId);
        await audit.record({ action: 'publishing.service.create', targetType: 'api_service', targetId: service.id, details: { key: service.key } });
        return reply(201, publicService(service));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api-services',
      summary: 'List API Services',
      description: 'The API Services of this organization, of one project with `project_id`.',
      capability: 'publishing.read',
      request: { query: z.object({ project_id: s.pathId.optional() }) },
      responses: { 200: { description: 'API Services', schema: z.object({ items: z.array(serviceSchema) }) } },
      handler: async ({ query, orgId }) => ({ items: (await services.list(orgId, query.project_id)).map(publicService) }),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api-services/{id}',
      summary: 'Get an API Service',
      description: 'One API Service of this organization, with its endpoints and status.',
      capability: 'publishing.read',
      request: { params: idParams },
      responses: { 200: { description: 'The API Service', schema: serviceSchema } },
      handler: async ({ params, orgId }) => publicService(await services.get(orgId, params.id)),
    }),
    defineRoute({
      ...base,
      method: 'patch',
      path: '/api-services/{id}',
      summary: 'Change an API Service',
      description: 'Changes the name, key or endpoints (its project stays). A published service serves new endpoints at once, reading with the rights of who changed them (`published_by`).',
      capability: 'publishing.write',
      request: { params: idParams, body: serviceInput.omit({ project_id: true }).partial() },
      responses: { 200: { description: 'The API Service', schema: serviceSchema }, 409: { description: 'The key is taken' }, 422: { description: 'A dataset or model that does not exist here' } },
      handler: async ({ params, body, orgId, principal, audit }) => {
        const current = await services.get(orgId, params.id);
        if (body.endpoints) await check(orgId, body.endpoints);
        // New endpoints of a published service read with the rights of who wrote them, never with
        // the earlier publisher's: nobody makes a service read what they could not read themselves.
        const republished = body.endpoints !== undefined && published(current);
        if (republished) {
          mayLendRights(principal);
          await indexLookups(orgId, body.endpoints!);
        }
        const service = await services.update(orgId, params.id, body, republished ? storedActorOf(principal) : undefined);
        await audit.record({ action: 'publishing.service.update', targetType: 'api_service', targetId: service.id, details: { changes: Object.keys(body) } });
        return publicService(service);
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/api-services/{id}',
      summary: 'Delete an API Service',
      description: 'Deletes the service and its data API keys.',
      capability: 'publishing.write',
      request: { params: idParams },
      responses: { 204: { description: 'Deleted' } },
      handler: async ({ params, orgId, audit }) => {
        await services.remove(orgId, params.id);
        await audit.record({ action: 'publishing.service.delete', targetType: 'api_service', targetId: params.id });
        return reply(204);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/api-services/{id}/publish',
      summary: 'Publish an API Service',
      description:
        'Its endpoints answer on /api/service/{key}/{endpoint} from now on, reading with the rights of the caller (checked again on every call): row policies and PII rules apply to that user. A database index is created on the key columns of each lookup.',
      capability: 'publishing.write',
      request: { params: idParams },
      responses: { 200: { description: 'The API Service', schema: serviceSchema } },
      handler: async ({ params, orgId, principal, audit }) => {
        mayLendRights(principal);
        const current = await services.get(orgId, params.id);
        await check(orgId, current.endpoints);
        await indexLookups(orgId, current.endpoints);
        const service = await services.publish(orgId, params.id, storedActorOf(principal));
        await audit.record({ action: 'publishing.service.publish', targetType: 'api_service', targetId: service.id, details: { key: service.key } });
        return publicService(service);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/api-services/{id}/unpublish',
      summary: 'Unpublish an API Service',
      description: 'Calls answer 404 until it is published again; its keys stay.',
      capability: 'publishing.write',
      request: { params: idParams },
      responses: { 200: { description: 'The API Service', schema: serviceSchema } },
      handler: async ({ params, orgId, audit }) => {
        await services.get(orgId, params.id);
        const service = await services.unpublish(orgId, params.id);
        await audit.record({ action: 'publishing.service.unpublish', targetType: 'api_service', targetId: service.id, details: { key: service.key } });
        return publicService(service);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/api-services/{id}/keys',
      summary: 'Mint a data API key',
      description:
        'Only the user who published the service (`published_by`) may mint its keys: they read with that user\u2019s rights. The secret (`key`, prefix `dpk_`) is answered once; only a keyed hash of it is kept. Callers send it as `X-API-Key`. `fixed_params` are locked for every call of the key (a SQL parameter, or a lookup column as a filter) and a caller may not send them.',
      capability: 'publishing.write',
      request: { params: idParams, body: keyInput },
      responses: { 201: { description: 'Minted; the secret shown once', schema: keySchema.extend({ key: z.string() }) }, 403: { description: 'The caller is not the service\u2019s publisher, or it was never published' } },
      handler: async ({ params, body, orgId, principal, audit }) => {
        const service = await services.get(orgId, params.id);
        mayMint(service, principal);
        const fields = await checkKeyFields(body, service, orgId, catalog);
        const { secret, key } = await keys.mint(orgId, service.id, fields, principal.userId);
        await audit.record({ security: true, action: 'publishing.key.mint', targetType: 'api_key', targetId: key.id, details: { service_id: service.id, name: key.name, allowed_endpoints: key.allowed_endpoints } });
        return reply(201, { ...publicKey(key), key: secret });
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api-services/{id}/keys',
      summary: 'List the data API keys of an API Service',
      description: 'Without their secrets; `last_used_at` is kept to the minute.',
      capability: 'publishing.read',
      request: { params: idParams },
      responses: { 200: { description: 'Keys', schema: z.object({ items: z.array(keySchema) }) } },
      handler: async ({ params, orgId }) => {
        await services.get(orgId, params.id);
        return { items: (await keys.list(orgId, params.id)).map(publicKey) };
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/api-services/{id}/keys/{key_id}',
      summary: 'Revoke a data API key',
      description: 'Its next call is refused (401).',
      capability: 'publishing.write',
      request: { params: z.object({ id: s.pathId, key_id: s.pathId }) },
      responses: { 204: { description: 'Revoked' } },
      handler: async ({ params, orgId, audit }) => {
        await services.get(orgId, params.id);
        const { key, revokedNow } = await keys.revoke(orgId, params.id, params.key_id);
        if (revokedNow) await audit.record({ security: true, action: 'publishing.key.revoke', targetType: 'api_key', targetId: key.id, details: { service_id: params.id, name: key.name } });
        return reply(204);
      },
    }),
  ];
}
