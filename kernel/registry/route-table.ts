import type { Context, Middleware } from 'koa';
import type { RequestState } from '../http/state.ts';
import { HttpProblem, problems } from '../problem.ts';

/** A route to serve: OpenAPI-style path (`/api/datasets/{id}`), method, and the middleware serving it. */
export interface RouteEntry {
  path: string;
  method: string;
  serve: Middleware;
}

/** A path as matched once: the route serving it and its parameters (frozen: every request of the path shares them). */
interface Match {
  serve: Middleware;
  params: Readonly<Record<string, string>>;
}

/** Paths a table remembers per method, each at most so long; past the count it starts again (paths of resources nobody asks again go). */
const REMEMBERED_PATHS = 4096;
const REMEMBERED_PATH_LENGTH = 256;
const NO_PARAMS: Readonly<Record<string, string>> = Object.freeze({});

/** A route with parameters, as matched: its method, its path as a pattern, its parameters' names. */
interface PatternRoute {
  method: string;
  pattern: RegExp;
  names: string[];
  serve: Middleware;
}

const isParameter = (segment: string) => segment.startsWith('{');
const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The first two segments of a path (`/api/datasets`), the bucket its routes live in (lower-case: a bucket's routes match any case). */
function bucketOf(path: string): string {
  const second = path.indexOf('/', path.indexOf('/', 1) + 1);
  return second === -1 ? path : path.slice(0, second);
}

/** A parameter's value decoded; text that does not decode is passed as sent (as @koa/router did). */
function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** A path's pattern: any letter case, an optional trailing slash, a parameter one whole segment. */
function compile(entry: RouteEntry): PatternRoute {
  const names: string[] = [];
  const source = entry.path
    .split('/')
    .map((segment) => {
      if (!isParameter(segment)) return escapeRegExp(segment);
      names.push(segment.slice(1, -1));
      return '([^/]+?)';
    })
    .join('/');
  return { method: entry.method.toUpperCase(), pattern: new RegExp(`^${source}/?$`, 'i'), names, serve: entry.serve };
}

/**
 * Matches a request to its route without trying every route of every plugin in turn: a path
 * without parameters is one map lookup, any other is matched among the routes that share its first
 * two segments (one plugin's, as a rule), static segments before parameters, in any letter case,
 * with an optional trailing slash. What matches nothing is 404, a known path with another method
 * 405 with Allow. A path matched is remembered (a bounded number per method): the calls of an API
 * Service endpoint, or the reads of one dataset, share one path, and match it once. (A matcher of
 * its own: @koa/router composed a middleware chain per request.)
 */
export class RouteTable {
  private readonly exact = new Map<string, Middleware>();
  private readonly buckets = new Map<string, PatternRoute[]>();
  /** Every route: matched when a parameter among the first two segments of a route makes buckets unsound. */
  private readonly all: PatternRoute[];
  private readonly remembered = new Map<string, Map<string, Match>>();

  constructor(entries: RouteEntry[]) {
    // Static segments must win over parameters (`/recipe-types` before `/{id}`): they come first.
    const specificity = (p: string) => p.split('/').map((s) => (isParameter(s) ? '1' : '0')).join('');
    const ordered = [...entries].sort((a, b) => specificity(a.path).localeCompare(specificity(b.path)));
    this.all = ordered.map(compile);
    let bucketsAreSound = true;
    for (const [i, entry] of ordered.entries()) {
      const segments = entry.path.split('/');
      if (!segments.some(isParameter)) this.exact.set(`${entry.method.toUpperCase()} ${entry.path}`, entry.serve);
      // A parameter among the first two segments could match any bucket: then only `all` is sound.
      if (segments.slice(0, 3).some(isParameter)) bucketsAreSound = false;
      const bucket = bucketOf(entry.path).toLowerCase();
      if (!this.buckets.has(bucket)) this.buckets.set(bucket, []);
      this.buckets.get(bucket)!.push(this.all[i]);
    }
    if (!bucketsAreSound) this.buckets.clear();
  }

  dispatch(ctx: Context): Promise<void> {
    const { method: asked, path } = ctx.state as RequestState;
    const method = asked === 'HEAD' ? 'GET' : asked;
    let paths = this.remembered.get(method);
    if (!paths) this.remembered.set(method, (paths = new Map()));
    let match = paths.get(path);
    if (!match) {
      const found = this.match(method, path);
      if (!found) return Promise.reject(this.refusal(ctx));
      match = found;
      if (path.length <= REMEMBERED_PATH_LENGTH) {
        if (paths.size >= REMEMBERED_PATHS) paths.clear();
        paths.set(path, match);
      }
    }
    (ctx as Context & { params: Readonly<Record<string, string>> }).params = match.params;
    return match.serve(ctx, unreachable);
  }

  private match(method: string, path: string): Match | undefined {
    const exact = this.exact.get(`${method} ${path}`);
    if (exact) return { serve: exact, params: NO_PARAMS };
    // Paths come in lower case as a rule: their bucket is found without lower-casing it first.
    const bucket = bucketOf(path);
    const candidates = this.buckets.get(bucket) ?? this.buckets.get(bucket.toLowerCase()) ?? this.all;
    for (const route of candidates) {
      if (route.method !== method) continue;
      const found = route.pattern.exec(path);
      if (!found) continue;
      const params: Record<string, string> = {};
      for (let i = 0; i < route.names.length; i += 1) params[route.names[i]] = decoded(found[i + 1]);
      return { serve: route.serve, params: Object.freeze(params) };
    }
    return undefined;
  }

  private refusal(ctx: Context): HttpProblem {
    const methods = new Set(this.all.filter((route) => route.pattern.test(ctx.path)).map((route) => route.method));
    if (methods.size === 0) return notServed(ctx);
    if (methods.has('GET')) methods.add('HEAD');
    return new HttpProblem(405, `${ctx.method} is not allowed on ${ctx.path}`, { headers: { Allow: [...methods].join(', ') } });
  }
}

/** The answer to a path nobody serves (also to an org-scoped route of a plugin disabled for the organization). */
export function notServed(ctx: Context): HttpProblem {
  return problems.notFound(`no route ${ctx.method} ${ctx.path}`);
}

// A served route answers; it never hands the request on.
const unreachable = async () => {
  throw new Error('a route handler called next()');
};
