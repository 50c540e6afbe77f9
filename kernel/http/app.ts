import http from 'node:http';
import Koa, { type Context, type Middleware } from 'koa';
import type { Logger } from 'pino';
import type { Storage } from '../../storage/index.ts';
import { problems } from '../problem.ts';
import type { RateLimitStore } from '../rate-limit/rate-limit-store.ts';
import { cors } from './cors.ts';
import { docsRoutes } from './docs.ts';
import { KernelResponse } from './kernel-response.ts';
import { rateLimits, type RateLimitSettings } from './rate-limits.ts';
import { requestContext } from './request-context.ts';
import type { RequestState } from './state.ts';

type KernelContext = Context & { state: RequestState };
export type KernelServer = http.Server<typeof http.IncomingMessage, typeof KernelResponse>;

export interface AppDeps {
  logger: Logger;
  storage: Storage;
  openapi: () => Record<string, unknown>;
  /** Serves a request from the current plugin generation (read anew for every request). */
  dispatch: (ctx: KernelContext) => Promise<void>;
  corsOrigins: readonly string[];
  rateLimitStore: RateLimitStore;
  rateLimits: RateLimitSettings;
  /** Take the client address from X-Forwarded-For (behind a reverse proxy). */
  trustProxy: boolean;
}

/** Counts requests in progress so shutdown can wait for them. */
export class InflightCounter {
  private count = 0;
  private waiters: (() => void)[] = [];
  draining = false;

  enter(ctx: Context): void {
    this.count += 1;
    if (this.draining) ctx.set('Connection', 'close');
    // A request ends when its answer is written (or its connection drops), not when the middleware
    // returns: Koa writes the body after that, and shutdown closes every connection once idle.
    // `on`, not `once`: an answer closes once, and a once-listener costs a wrapper and its removal.
    ctx.res.on('close', this.ended);
  }

  // A bound field, not a closure per request.
  private readonly ended = () => {
    this.count -= 1;
    if (this.count === 0 && this.waiters.length > 0) this.waiters.splice(0).forEach((wake) => wake());
  };

  /** Resolves when no request is in progress, or after `timeoutMs`. */
  idle(timeoutMs: number): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

/** Health endpoints, outside the description: liveness, and readiness including the database. The step answers them, or nothing for any other request. */
function healthRoutes(storage: Storage, inflight: InflightCounter): (ctx: KernelContext) => Promise<void> | undefined {
  const ready = async (ctx: Context) => {
    if (inflight.draining) throw problems.unavailable('shutting down');
    try {
      await storage.ping();
    } catch {
      throw problems.unavailable('database unreachable');
    }
    ctx.body = { status: 'ready' };
  };
  return (ctx) => {
    const { method, path } = ctx.state;
    if (method === 'GET' && path === '/healthz') {
      ctx.body = { status: 'ok' };
      return DONE;
    }
    if (method === 'GET' && path === '/readyz') return ready(ctx);
    return undefined;
  };
}

const DONE = Promise.resolve();

/**
 * Everything between the request context and a route, as one middleware (each middleware is a
 * layer of Koa's composition for every request): counted in flight, CORS (a preflight answered
 * here), health, the per-address rate limits, the docs, then one dispatch into the current plugin
 * generation. The steps are checks that answer or pass; the security headers are the response's
 * (kernel-response.ts).
 */
function frontDoor(deps: AppDeps, inflight: InflightCounter): Middleware<RequestState> {
  const preflight = cors(deps.corsOrigins);
  const health = healthRoutes(deps.storage, inflight);
  const limit = rateLimits(deps.rateLimitStore, deps.rateLimits);
  const docs = docsRoutes(deps.openapi);
  const route = (ctx: KernelContext) => docs(ctx) ?? deps.dispatch(ctx);
  return (ctx) => {
    inflight.enter(ctx);
    if (preflight(ctx)) return DONE;
    const healthAnswer = health(ctx);
    if (healthAnswer) return healthAnswer;
    const limited = limit(ctx);
    return limited ? limited.then(() => route(ctx)) : route(ctx);
  };
}

/**
 * The kernel's HTTP pipeline, composed once: request id and problem details, then the front door
 * (in-flight counting, CORS, health, rate limits, docs) and one dispatcher into the swappable
 * plugin generation.
 */
export function createApp(deps: AppDeps): { app: Koa; inflight: InflightCounter } {
  const app = new Koa({ proxy: deps.trustProxy });
  const inflight = new InflightCounter();
  app.silent = true; // errors are answered and logged by requestContext
  app.use(requestContext(deps.logger, (err) => deps.storage.isConnectionLost(err)));
  app.use(frontDoor(deps, inflight));
  return { app, inflight };
}

/** The HTTP server of the kernel's app: its responses answer the request id and the security headers (kernel-response.ts). */
export function createKernelServer(app: Koa): KernelServer {
  return http.createServer({ ServerResponse: KernelResponse }, app.callback());
}
