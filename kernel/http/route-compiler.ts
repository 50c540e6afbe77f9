import type { Context, Middleware } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import type { ZodType } from 'zod';
import type { AuditService } from '../audit/audit-service.ts';
import type { Authenticator, Identity } from '../auth/authenticator.ts';
import { effectiveCapabilities } from '../auth/capabilities.ts';
import type { Tenancy } from '../auth/tenancy.ts';
import type { IdentitySnapshot } from '../identity/identity-snapshot.ts';
import { fieldErrorsOf, HttpProblem, problems, type FieldError } from '../problem.ts';
import type { RateLimitStore } from '../rate-limit/rate-limit-store.ts';
import type { CapabilityInfo, MountedRoute, RouteCompiler } from '../registry/generation.ts';
import { isReply, type Principal, type RouteDefinition } from '../route.ts';
import type { RequestState } from './state.ts';

export interface RouteCompilerDeps {
  authenticator: Authenticator;
  tenancy: Tenancy;
  identity: IdentitySnapshot;
  audit: AuditService;
  capabilities: () => ReadonlyMap<string, CapabilityInfo>;
  rateLimits: RateLimitStore;
  /** Requests per minute per personal access token; 0 = unlimited. */
  patRateLimitPerMin: number;
  bodyLimit: string;
  /** Check every answer against its declared schema (development and test): drift is a 500. */
  validateResponses: boolean;
}

const PARSED_METHODS = [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE];

/**
 * Compiles a route declaration into the middleware serving it, in a fixed order: authenticate,
 * resolve the organization, compute capabilities and check the route's, parse and validate the
 * request, run the handler, check the answer. The owning plugin version counts it as in flight.
 */
export function createRouteCompiler(deps: RouteCompilerDeps): RouteCompiler {
  return (mounted: MountedRoute): Middleware => {
    const { route, plugin } = mounted;
    const successStatus = Object.keys(route.responses).map(Number).filter((s) => s < 300).sort()[0] ?? 200;
    const bodyTypes = route.request?.bodyTypes ?? ['application/json'];
    const parseBody = koaBody({
      jsonLimit: route.request?.bodyLimit ?? deps.bodyLimit,
      jsonTypes: bodyTypes,
      json: true,
      jsonStrict: false,
      urlencoded: false,
      text: false,
      multipart: false,
      parsedMethods: PARSED_METHODS,
    });
    // One async function per request, counted in flight by the plugin version that serves it.
    return async (ctx) => {
      plugin.enter();
      try {
        const state = ctx.state as RequestState;
        const principal = await authorize(route, ctx, state, deps);
        const streamed = route.request?.stream;
        if (streamed && !ctx.is(streamed.contentTypes)) {
          throw new HttpProblem(415, `send the body as ${streamed.contentTypes.join(' or ')}, not ${ctx.request.type || 'an unnamed type'}`);
        }
        if (route.request?.body) {
          if (ctx.request.length && !ctx.is(bodyTypes)) throw new HttpProblem(415, `send the body as ${bodyTypes.join(' or ')}, not ${ctx.request.type || 'an unnamed type'}`);
          await parseBody(ctx, async () => undefined);
        }
        const errors: FieldError[] = [];
        const params = check('params', route.request?.params, (ctx as unknown as { params: unknown }).params ?? {}, errors);
        const query = check('query', route.request?.query, ctx.query, errors);
        const headers = check('headers', route.request?.headers, ctx.headers, errors);
        const body = check('body', route.request?.body, ctx.request.body, errors);
        if (errors.length) throw problems.badRequest(`request validation failed: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`, errors);

        const orgId = state.orgId ?? null;
        const result = await route.handler({ params, query, headers, body, principal, orgId, requestId: state.requestId, log: state.log, audit: deps.audit.for(state), koa: ctx } as never);
        respond(ctx, route, successStatus, result, deps.validateResponses);
      } finally {
        plugin.leave();
      }
    };
  };
}

/** Who calls, in which organization, with which capabilities; refuses what the route does not allow. */
async function authorize(route: RouteDefinition, ctx: Context, state: RequestState, deps: RouteCompilerDeps): Promise<Principal | null> {
  if (route.security === 'none') return null;
  if (route.security === 'apiKey') throw problems.notImplemented('no data API key authenticator is installed');
  const identity = await deps.authenticator.identify(ctx.get('Authorization') || undefined);
  if (identity.via === 'pat' && deps.patRateLimitPerMin > 0) await limitToken(identity, deps);
  const orgId = await deps.tenancy.resolve(identity, ctx.get('X-Org-Id') || undefined, route.orgScoped === true, state);
  const capabilities = await effectiveCapabilities(identity, orgId, deps.capabilities(), deps.identity);
  const principal: Principal = { ...identity, capabilities };
  state.principal = principal;
  state.orgId = orgId ?? undefined;
  if (route.capability && !capabilities.has(route.capability)) {
    const scoped = identity.scopes && !identity.scopes.has(route.capability) ? ' (not among this token\u2019s scopes)' : '';
    throw problems.forbidden(`this operation needs the capability "${route.capability}"${scoped}`);
  }
  return principal;
}

async function limitToken(identity: Identity, deps: RouteCompilerDeps) {
  const decision = await deps.rateLimits.take(`pat:${identity.tokenId}`, deps.patRateLimitPerMin, 60_000);
  if (!decision.allowed) {
    throw problems.tooManyRequests(`this token made more than ${deps.patRateLimitPerMin} requests in a minute`, Math.max(1, Math.ceil(decision.retryAfterMs / 1000)));
  }
}

function check(location: string, schema: ZodType | undefined, value: unknown, errors: FieldError[]): unknown {
  if (!schema) return undefined;
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  errors.push(...fieldErrorsOf(parsed.error.issues, location));
  return undefined;
}

/** Writes the handler's answer: a `reply()` names its status, a bare body gets the route's first 2xx. */
function respond(ctx: Context, route: RouteDefinition, successStatus: number, result: unknown, validate: boolean) {
  const status = isReply(result) ? result.status : successStatus;
  const body = isReply(result) ? result.body : result;
  if (validate) {
    const response = route.responses[status];
    if (!response) throw new Error(`route ${route.method.toUpperCase()} ${route.path} answered ${status}, which it does not declare`);
    const parsed = response.schema?.safeParse(body);
    if (parsed && !parsed.success) {
      throw new Error(`route ${route.method.toUpperCase()} ${route.path} answered a body that breaks its declared ${status} schema: ${parsed.error.message}`);
    }
  }
  ctx.status = status;
  if (isReply(result)) for (const [name, value] of Object.entries(result.headers ?? {})) ctx.set(name, value);
  if (status !== 204 && body !== undefined) ctx.body = body;
}
