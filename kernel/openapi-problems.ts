import { z } from 'zod';
import { inAuthBucket, inGeneralBucket } from './http/rate-limits.ts';
import type { RouteDefinition } from './route.ts';

/** The body of every error answer, as `problemBody` (kernel/problem.ts) writes it. */
export const problemSchema = z
  .object({
    type: z.string().describe('A URI naming the kind of problem; `about:blank` when the status says it all'),
    title: z.string().describe('Short summary of the status, e.g. `Not Found`'),
    status: z.number().int().describe('The HTTP status of the answer'),
    detail: z.string().describe('What went wrong with this request, for a human'),
    request_id: z.string().describe('The X-Request-Id of the request; quote it when reporting a problem'),
    code: z.string().optional().describe('A stable, machine-readable reason, where the status alone is ambiguous'),
    errors: z
      .array(
        z.object({
          path: z.string().describe('Location and path of the field, e.g. `body.name`, `query.limit`, `headers.x-org-id`'),
          message: z.string(),
        }),
      )
      .optional()
      .describe('Each failing field of a request that failed validation'),
  })
  .meta({ id: 'Problem', description: 'RFC 9457 problem details, sent as `application/problem+json`' });

/**
 * The error statuses a route can answer, each with why, derived from its declaration and from
 * what the kernel's pipeline does before and around its handler (app.ts, rate-limits.ts,
 * authorizer.ts, tenancy.ts, route-compiler.ts, request-context.ts). Statuses only a handler
 * answers (409, 422, a lookup's 404 without a path parameter…) are declared in the route's own
 * `responses`, which win over these.
 */
export function derivedProblems(path: string, route: RouteDefinition): Map<number, string> {
  const request = route.request;
  const secured = route.security !== 'none';
  // An apiKey route always works in its key's organization, as the route compiler treats it.
  const inOrganization = route.orgScoped === true || route.security === 'apiKey';
  const hasPathParameter = request?.params !== undefined || path.includes('{');
  const reasons = new Map<number, string[]>();
  const add = (status: number, reason: string) => reasons.set(status, [...(reasons.get(status) ?? []), reason]);

  if (request?.params || request?.query || request?.headers || request?.body) add(400, 'the request failed validation (`errors` names each failing field)');
  if (request?.body) add(400, 'the body is not valid JSON');
  if (route.orgScoped) add(400, 'no organization: `X-Org-Id` is missing and the caller has no default organization, or it is not an integer');
  // A bearer route resolves `X-Org-Id` when it is sent, org-scoped or not (tenancy.ts); an apiKey route checks it against the key's.
  if ((route.security === 'bearer' && !route.orgScoped) || route.security === 'apiKey') add(400, '`X-Org-Id` is sent but is not an integer');
  if (secured) add(401, route.security === 'apiKey' ? 'missing or invalid API key' : 'missing, invalid or expired bearer token');
  if (route.capability) add(403, `the caller lacks the capability \`${route.capability}\``);
  if (route.orgScoped) add(403, 'the organization does not exist or the caller is not a member');
  if (route.security === 'bearer' && !route.orgScoped) add(403, 'the organization `X-Org-Id` names does not exist or the caller is not a member');
  if (route.security === 'apiKey') add(403, '`X-Org-Id` names another organization than the key\'s');
  if (route.security === 'bearer' && !route.allowDuringPasswordChange) add(403, 'the caller must first change a temporary password (`code` `password_change_required`; only with REQUIRE_PASSWORD_CHANGE)');
  if (hasPathParameter) add(404, 'nothing exists under the given path parameter (or the caller may not see it)');
  if (inOrganization) add(404, 'the plugin is not enabled in the organization');
  if (request?.body) add(413, `the body is larger than the limit (${request.bodyLimit ?? 'BODY_LIMIT'})`);
  if (request?.body) add(415, `the body is not of type ${(request.bodyTypes ?? ['application/json']).join(' or ')}`);
  if (request?.stream) add(415, `the body is not of type ${request.stream.contentTypes.join(' or ')}`);
  if (inGeneralBucket(path) && !inAuthBucket(path)) add(429, 'too many requests from this client address (`Retry-After` says when to retry)');
  if (route.security === 'bearer') add(429, 'a personal access token made too many requests this minute (`Retry-After`)');
  if (route.security === 'apiKey') add(429, 'the API key made too many requests this minute (`Retry-After`)');
  if (inAuthBucket(path)) add(503, 'too many authentication requests from this client address (`Retry-After`)');
  add(503, 'the connection to the database was lost while answering; retry');

  return new Map([...reasons].sort(([a], [b]) => a - b).map(([status, why]) => [status, capitalized(why.join('; or '))]));
}

const capitalized = (text: string) => text[0].toUpperCase() + text.slice(1);
