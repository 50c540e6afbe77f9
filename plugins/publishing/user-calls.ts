/**
 * An endpoint of a published API Service called by a signed-in user instead of a data API key (what
 * the agent tool `call_api_service` does): with the user's own rights (their row policies; PII in
 * clear only as `unmasked_columns` and their `datasets.pii.read` allow), no fixed inputs, and its
 * input, a JSON body, checked first against the endpoint's description in the service's OpenAPI
 * document (its POST operation's request body), so a caller is told exactly what the service expects.
 */
import { checkOnce, problems, withFieldsRenamed, type Principal, type RequestAudit } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog } from '../datasets/public.ts';
import type { EndpointRunner } from './calls.ts';
import type { ServiceStore } from './service-store.ts';
import { endpointOperations, type DocumentDeps } from './service-openapi.ts';

export interface UserCall {
  orgId: number;
  principal: Principal;
  audit: RequestAudit;
  serviceKey: string;
  endpoint: string;
  /** The endpoint's input as a POST on the service path carries it. */
  input: Record<string, unknown>;
  /** Where the input sits in the caller's request, for the field errors (`arguments.input`). */
  location: string;
}

type UserCallDeps = Omit<DocumentDeps, 'services' | 'keys' | 'delegation'> & { services: ServiceStore; catalog: DatasetCatalog; run: EndpointRunner };

export function userCalls(deps: UserCallDeps) {
  return async ({ orgId, principal, audit, serviceKey, endpoint: name, input, location }: UserCall): Promise<unknown> => {
    const service = await deps.services.byKey(serviceKey);
    if (!service || service.org_id !== orgId || service.status !== 'published') throw problems.notFound(`no published API Service "${serviceKey}" in this organization`);
    if (!principal.capabilities.has('datasets.read')) throw problems.forbidden('an API Service called as you reads datasets with your rights: this needs the capability "datasets.read"');
    const endpoint = service.endpoints.find((e) => e.name === name);
    if (!endpoint) throw problems.notFound(`API Service "${serviceKey}" has no endpoint "${name}" (its endpoints: ${service.endpoints.map((e) => e.name).join(', ')})`);
    const operations = await endpointOperations(deps, endpoint, {}, orgId, deps.catalog.seesPii(principal));
    const body = (operations?.post as { requestBody?: { content: Record<string, { schema: Record<string, unknown> }> } } | undefined)?.requestBody;
    if (body) {
      const errors = checkOnce(body.content['application/json'].schema, input, location);
      if (errors.length) throw problems.invalidFields(errors);
    }
    try {
      return await deps.run(endpoint, { source: 'body', values: input }, { orgId, publisher: principal, fixed: {}, audit });
    } catch (err) {
      // The endpoint names an input as a POST body's (`body.region`): named where the caller put it (`arguments.input.region`).
      throw withFieldsRenamed(err, (path) => (path === 'body' || path.startsWith('body.') ? location + path.slice('body'.length) : path));
    }
  };
}
