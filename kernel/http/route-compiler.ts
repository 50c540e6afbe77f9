import type { Context, Middleware } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import type { ZodType } from 'zod';
import type { Authenticator } from '../auth/authenticator.ts';
import type { Tenancy } from '../auth/tenancy.ts';
import { HttpProblem, problems, type FieldError } from '../problem.ts';
import type { CapabilityInfo, MountedRoute, RouteCompiler } from '../registry/generation.ts';
import { isReply, type Principal, type RouteDefinition } from '../route.ts';
import type { RequestState } from './state.ts';

export interface RouteCompilerDeps {
  authenticator: Authenticator;
  tenancy: Tenancy;
  capabilities: () => ReadonlyMap<string, CapabilityInfo>;
  bodyLimit: string;
  /** Check every answer against its declared schema (development and test): drift is a 500. */
  validateResponses: boolean;
}

/**
 * Compiles a route declaration into the middleware serving it, in a fixed order: authenticate,
 * check the capability, resolve the organization, parse and validate the request, run the handler,
 * check the answer. The plugin version that owns the route counts the request as in flight.
 */
export function createRouteCompiler(deps: RouteCompilerDeps): RouteCompiler {
  const parseJson = koaBody({ jsonLimit: deps.bodyLimit, json: true, jsonStrict: false, urlencoded: false, text: false, multipart: false, parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE] });

  return (mounted: MountedRoute): Middleware => {
    const { route, plugin } = mounted;
    return (ctx) =>
      plugin.track(async () => {
        const state = ctx.state as RequestState;
        const principal = await authenticate(route, ctx, deps);
        if (route.capability && !principal?.capabilities.has(route.capability)) {
          throw problems.forbidden(`this operation needs the capability "${route.capability}"`);
        }
        state.principal = principal ?? undefined;
        const orgId = route.orgScoped && principal ? await deps.tenancy.resolve(principal, ctx.get('X-Org-Id') || undefined) : null;
        state.orgId = orgId ?? undefined;

        if (route.request?.body) {
          if (ctx.request.length && !ctx.is('application/json')) throw new HttpProblem(415, `send the body as application/json, not ${ctx.request.type || 'an unnamed type'}`);
          await parseJson(ctx, async () => undefined);
        }
        const errors: FieldError[] = [];
        const params = check('params', route.request?.params, (ctx as unknown as { params: unknown }).params ?? {}, errors);
        const query = check('query', route.request?.query, ctx.query, errors);
        const headers = check('headers', route.request?.headers, ctx.headers, errors);
        const body = check('body', route.request?.body, ctx.request.body, errors);
        if (errors.length) throw problems.badRequest(`request validation failed: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`, errors);

        const result = await route.handler({ params, query, headers, body, principal, orgId, requestId: state.requestId, log: state.log, koa: ctx } as never);
        respond(ctx, route, result, deps.validateResponses);
      });
  };
}

async function authenticate(route: RouteDefinition, ctx: Context, deps: RouteCompilerDeps): Promise<Principal | null> {
  if (route.security === 'none') return null;
  if (route.security === 'bearer') return deps.authenticator.authenticate(ctx.get('Authorization') || undefined, deps.capabilities());
  throw problems.notImplemented('no data API key authenticator is installed');
}

function check(location: string, schema: ZodType | undefined, value: unknown, errors: FieldError[]): unknown {
  if (!schema) return undefined;
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) {
    errors.push({ path: [location, ...issue.path.map(String)].join('.'), message: issue.message });
  }
  return undefined;
}

function respond(ctx: Context, route: RouteDefinition, result: unknown, validate: boolean) {
  const declared = Object.keys(route.responses).map(Number).filter((s) => s < 300).sort();
  const status = isReply(result) ? result.status : declared[0] ?? 200;
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
