import Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { HttpProblem, problems } from '../problem.ts';

/** A route to serve: OpenAPI-style path (`/api/datasets/{id}`), method, and the middleware serving it. */
export interface RouteEntry {
  path: string;
  method: string;
  serve: Middleware;
}

const toKoaPath = (path: string) => path.replace(/\{([^}]+)\}/g, ':$1');
const isParameter = (segment: string) => segment.startsWith('{');

/** The first two segments of a path (`/api/datasets`), the bucket its routes live in. */
function bucketOf(path: string): string {
  const second = path.indexOf('/', path.indexOf('/', 1) + 1);
  return (second === -1 ? path : path.slice(0, second)).toLowerCase();
}

/**
 * Matches a request to its route without trying every route of every plugin in turn: a path
 * without parameters is one map lookup, any other is matched among the routes that share its first
 * two segments (one plugin's, as a rule), with @koa/router's rules (any letter case, an optional
 * trailing slash). What matches nothing is 404, a known path with another method 405 with Allow.
 */
export class RouteTable {
  private readonly exact = new Map<string, Middleware>();
  private readonly buckets = new Map<string, Middleware>();
  private readonly all = new Router();
  /** Every route: serves when a parameter among the first two segments of a route makes buckets unsound. */
  private readonly allMiddleware: Middleware;

  constructor(entries: RouteEntry[]) {
    // Static segments must win over parameters (`/recipe-types` before `/{id}`): register them first.
    const specificity = (p: string) => p.split('/').map((s) => (isParameter(s) ? '1' : '0')).join('');
    const ordered = [...entries].sort((a, b) => specificity(a.path).localeCompare(specificity(b.path)));
    const bucketRouters = new Map<string, Router>();
    let bucketsAreSound = true;
    for (const entry of ordered) {
      const method = entry.method.toUpperCase();
      this.all.register(toKoaPath(entry.path), [method], entry.serve);
      const segments = entry.path.split('/');
      if (!segments.some(isParameter)) this.exact.set(`${method} ${entry.path}`, entry.serve);
      // A parameter among the first two segments could match any bucket: then only `all` is sound.
      if (segments.slice(0, 3).some(isParameter)) bucketsAreSound = false;
      const bucket = bucketOf(entry.path);
      if (!bucketRouters.has(bucket)) bucketRouters.set(bucket, new Router());
      bucketRouters.get(bucket)!.register(toKoaPath(entry.path), [method], entry.serve);
    }
    this.allMiddleware = this.all.routes() as unknown as Middleware;
    if (bucketsAreSound) for (const [bucket, router] of bucketRouters) this.buckets.set(bucket, router.routes() as unknown as Middleware);
  }

  dispatch(ctx: Context): Promise<void> {
    const method = ctx.method === 'HEAD' ? 'GET' : ctx.method;
    const exact = this.exact.get(`${method} ${ctx.path}`);
    if (exact) {
      (ctx as Context & { params: Record<string, string> }).params = {};
      return exact(ctx, unreachable);
    }
    const bucket = this.buckets.get(bucketOf(ctx.path));
    return (bucket ?? this.allMiddleware)(ctx, () => this.refuse(ctx));
  }

  private async refuse(ctx: Context): Promise<never> {
    const match = this.all.match(ctx.path, ctx.method);
    if (match.path.length === 0) throw notServed(ctx);
    const allowed = [...new Set(match.path.flatMap((layer) => layer.methods))].join(', ');
    throw new HttpProblem(405, `${ctx.method} is not allowed on ${ctx.path}`, { headers: { Allow: allowed } });
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
