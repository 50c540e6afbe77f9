import type { Context, Middleware } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';
import type { ZodType } from 'zod';
import type { AuditService } from '../audit/audit-service.ts';
import type { Authorizer } from '../auth/authorizer.ts';
import type { PluginEnablement } from '../registry/enablement.ts';
import { andThen, type Maybe } from '../maybe.ts';
import { fieldErrorsOf, HttpProblem, problems, type FieldError } from '../problem.ts';
import type { MountedRoute, RouteCompiler } from '../registry/generation.ts';
import { notServed } from '../registry/route-table.ts';
import { isReply, JsonText, type RouteDefinition } from '../route.ts';
import { refuseUnfitInput } from './input-text.ts';
import type { RequestState } from './state.ts';

export interface RouteCompilerDeps {
  authorizer: Authorizer;
  audit: AuditService;
  /** Which plugins serve which organization: an org-scoped route of a plugin disabled there is not found. */
  enablement: Pick<PluginEnablement, 'isEnabled'>;
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
    // The steps run one after the other; a step whose answer is at hand (a known caller, a handler
    // answering from memory) is not awaited: on the request path every promise layer costs more
    // than the lookup it would wrap.
    const parsedParams = new WeakMap<object, unknown>();
    const handle = (ctx: Context, state: RequestState): Maybe<void> => {
      refuseUnfitInput((ctx as unknown as { params?: Record<string, unknown> }).params, state.querystring, () => queryOf(state.querystring), ctx.request.body);
      const input = route.request ? validated(route, ctx, state.querystring, parsedParams) : NO_INPUT;
      const answer = route.handler({
        params: input.params,
        query: input.query,
        headers: input.headers,
        body: input.body,
        principal: state.principal ?? null,
        orgId: state.orgId ?? null,
        requestId: state.requestId,
        log: state.log,
        audit: deps.audit.for(state),
        koa: ctx,
      } as never);
      if (answer instanceof Promise) return answer.then((result) => respond(ctx, route, successStatus, result, deps.validateResponses));
      respond(ctx, route, successStatus, answer, deps.validateResponses);
    };
    const receive = (ctx: Context, state: RequestState): Maybe<void> => {
      const streamed = route.request?.stream;
      if (streamed && !ctx.is(streamed.contentTypes)) {
        // Koa finds no type for a request without a body: saying "not <its type>" would puzzle.
        if (ctx.request.length === 0) throw problems.badRequest(`the request body is empty: send it as ${streamed.contentTypes.join(' or ')}`, [{ path: 'body', message: 'empty' }]);
        throw new HttpProblem(415, `send the body as ${streamed.contentTypes.join(' or ')}, not ${ctx.request.type || 'an unnamed type'}`);
      }
      if (!route.request?.body) return handle(ctx, state);
      if (ctx.request.length && !ctx.is(bodyTypes)) throw new HttpProblem(415, `send the body as ${bodyTypes.join(' or ')}, not ${ctx.request.type || 'an unnamed type'}`);
      return parseBody(ctx, noop).then(() => handle(ctx, state), refuseUndecodable);
    };
    const serve = (ctx: Context): Maybe<void> => {
      const state = ctx.state as RequestState;
      if (route.secretPath) state.loggedPath = mounted.path;
      if (route.security === 'none') return receive(ctx, state);
      return andThen(deps.authorizer.authorize(route, state), ({ principal, orgId }) => {
        state.principal = principal;
        state.orgId = orgId ?? undefined;
        // An apiKey route always works in the key's organization: it is org-scoped whether it says so or not.
        if ((!route.orgScoped && route.security !== 'apiKey') || orgId === null) return receive(ctx, state);
        return andThen(deps.enablement.isEnabled(plugin.id, orgId), (enabled) => {
          // Answered as a path nobody serves, before the handler: nothing tells whether the resource exists.
          if (!enabled) throw notServed(ctx);
          return receive(ctx, state);
        });
      });
    };
    // Counted in flight by the plugin version that serves it, until its answer is settled.
    return (ctx) => {
      plugin.enter();
      let served: Maybe<void>;
      try {
        served = serve(ctx);
      } catch (err) {
        plugin.leave();
        return Promise.reject(err);
      }
      if (!(served instanceof Promise)) {
        plugin.leave();
        return DONE;
      }
      return served.finally(() => plugin.leave());
    };
  };
}

const DONE = Promise.resolve();
const noop = async () => undefined;
const NO_INPUT = { params: undefined, query: undefined, headers: undefined, body: undefined };

/**
 * The body parser inflates a body by its Content-Encoding (gzip, deflate, br; any other is its 415).
 * A body that does not decompress fails in zlib, whose errors carry a zlib code and no HTTP status:
 * the sender's fault, answered as a 400 naming the body rather than a 500.
 */
function refuseUndecodable(err: unknown): never {
  const { code, errno, status } = (err ?? {}) as { code?: unknown; errno?: unknown; status?: unknown };
  if (status === undefined && typeof errno === 'number' && typeof code === 'string' && /^(Z_|ERR__ERROR|ERR_BROTLI)/.test(code)) {
    throw problems.badRequest('the request body does not decompress as its Content-Encoding says', [{ path: 'body', message: 'not valid for its Content-Encoding' }]);
  }
  throw err;
}

/**
 * The request's parameters, query, headers and body, parsed by the route's schemas; 400 naming every
 * field that fails. Parameters that passed are kept by their object in `parsedParams`: the route
 * table gives every request of a path it remembers the same frozen parameters, so the calls of one
 * API Service endpoint, or the reads of one dataset, parse them once.
 */
function validated(route: RouteDefinition, ctx: Context, querystring: string, parsedParams: WeakMap<object, unknown>) {
  const schemas = route.request!;
  const errors: FieldError[] = [];
  const given = (ctx as unknown as { params?: Readonly<Record<string, string>> }).params;
  let params = given && parsedParams.get(given);
  if (params === undefined) {
    params = check('params', schemas.params, given ?? {}, errors);
    // Frozen too: every request of the path shares them.
    if (given && Object.isFrozen(given) && !errors.length) parsedParams.set(given, Object.freeze(params));
  }
  const query = schemas.query && check('query', schemas.query, queryOf(querystring), errors);
  const headers = schemas.headers && check('headers', schemas.headers, ctx.headers, errors);
  const body = check('body', schemas.body, ctx.request.body, errors);
  if (errors.length) throw problems.badRequest(`request validation failed: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`, errors);
  return { params, query, headers, body };
}

/**
 * The query string as an object, a name given more than once holding the array of its values: what
 * Koa's `ctx.query` answers, in one pass (Koa defines each name as a property, and the request path
 * pays for it). A `__proto__` name is an own property like any other, never the object's prototype.
 * A query with nothing to decode (no `%`, no `+`) is split as it is: URLSearchParams and its
 * iterator cost more than the rest of validating a one-key API Service call.
 */
export function queryOf(querystring: string): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = {};
  if (querystring === '') return query;
  if (querystring.includes('%') || querystring.includes('+')) {
    for (const [name, value] of new URLSearchParams(querystring)) addQueryValue(query, name, value);
    return query;
  }
  // As URLSearchParams splits: on `&`, empty parts skipped, the name up to the first `=`.
  for (let start = 0; start < querystring.length; ) {
    let end = querystring.indexOf('&', start);
    if (end < 0) end = querystring.length;
    if (end > start) {
      const equals = querystring.indexOf('=', start);
      if (equals < 0 || equals > end) addQueryValue(query, querystring.slice(start, end), '');
      else addQueryValue(query, querystring.slice(start, equals), querystring.slice(equals + 1, end));
    }
    start = end + 1;
  }
  return query;
}

function addQueryValue(query: Record<string, string | string[]>, name: string, value: string): void {
  const previous = Object.hasOwn(query, name) ? query[name] : undefined;
  if (Array.isArray(previous)) {
    previous.push(value);
    return;
  }
  const values = previous === undefined ? value : [previous, value];
  if (name === '__proto__') Object.defineProperty(query, name, { value: values, writable: true, enumerable: true, configurable: true });
  else query[name] = values;
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
    const declared = route.responses[status];
    if (!declared) throw new Error(`route ${route.method.toUpperCase()} ${route.path} answered ${status}, which it does not declare`);
    const parsed = declared.schema?.safeParse(body instanceof JsonText ? JSON.parse(body.text) : body);
    if (parsed && !parsed.success) {
      throw new Error(`route ${route.method.toUpperCase()} ${route.path} answered a body that breaks its declared ${status} schema: ${parsed.error.message}`);
    }
  }
  // On Koa's response, not through the context: the context's delegated setters take V8's slow path
  // for every store, which cost more than the rest of writing a small answer.
  const response = ctx.response;
  if (isReply(result)) for (const [name, value] of Object.entries(result.headers ?? {})) response.set(name, value);
  if (body instanceof JsonText && status !== 204) return writeJsonText(ctx, status, body);
  response.status = status;
  if (status === 204) return;
  if (body === undefined) {
    // Left unset, Koa would answer the status's reason phrase ("Created") as text/plain: a body the
    // route does not declare. An answer without a body is empty.
    response.body = '';
    response.remove('Content-Type');
    return;
  }
  response.body = body;
}

/**
 * A JSON text answered as it is (a cached answer, kept serialized): written on Node's response
 * here rather than by Koa (`ctx.respond = false`), whose body setter and response step cost as much
 * as the rest of serving a cached answer. The head goes in one list (see kernel-response.ts), with
 * the text's length (a HEAD answer's too, whose body Node leaves out).
 */
function writeJsonText(ctx: Context, status: number, body: JsonText) {
  ctx.respond = false;
  ctx.res.writeHead(status, ['content-type', 'application/json; charset=utf-8', 'content-length', body.contentLength]);
  ctx.res.end(body.text);
}
