import Koa, { type Context, type Middleware } from 'koa';
import type { Logger } from 'pino';
import type { Storage } from '../../storage/index.ts';
import { problems } from '../problem.ts';
import type { RateLimitStore } from '../rate-limit/rate-limit-store.ts';
import { cors } from './cors.ts';
import { docsRoutes } from './docs.ts';
import { rateLimits, type RateLimitSettings } from './rate-limits.ts';
import { requestContext } from './request-context.ts';
import { securityHeaders } from './security-headers.ts';
import type { RequestState } from './state.ts';

export interface AppDeps {
  logger: Logger;
  storage: Storage;
  openapi: () => Record<string, unknown>;
  /** Serves a request from the current plugin generation (read anew for every request). */
  dispatch: Middleware<RequestState>;
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

  readonly middleware: Middleware = (ctx, next) => {
    this.count += 1;
    if (this.draining) ctx.set('Connection', 'close');
    // A request ends when its answer is written (or its connection drops), not when the middleware
    // returns: Koa writes the body after that, and shutdown closes every connection once idle.
    // `on`, not `once`: an answer closes once, and a once-listener costs a wrapper and its removal.
    ctx.res.on('close', this.ended);
    return next();
  };

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

/** Health endpoints, outside the description: liveness, and readiness including the database. */
function healthRoutes(storage: Storage, inflight: InflightCounter): Middleware {
  const ready = async (ctx: Context) => {
    if (inflight.draining) throw problems.unavailable('shutting down');
    try {
      await storage.ping();
    } catch {
      throw problems.unavailable('database unreachable');
    }
    ctx.body = { status: 'ready' };
  };
  return (ctx, next) => {
    const { method, path } = ctx.state as RequestState;
    if (method === 'GET' && path === '/healthz') {
      ctx.body = { status: 'ok' };
      return Promise.resolve();
    }
    if (method === 'GET' && path === '/readyz') return ready(ctx);
    return next();
  };
}

/**
 * The kernel's HTTP pipeline, composed once: request id and problem details, in-flight counting,
 * security headers, CORS, health, rate limits, docs, then one dispatcher into the swappable plugin
 * generation.
 */
export function createApp(deps: AppDeps): { app: Koa; inflight: InflightCounter } {
  const app = new Koa({ proxy: deps.trustProxy });
  const inflight = new InflightCounter();
  app.silent = true; // errors are answered and logged by requestContext
  app.use(requestContext(deps.logger, (err) => deps.storage.isConnectionLost(err)));
  app.use(inflight.middleware);
  app.use(securityHeaders());
  app.use(cors(deps.corsOrigins));
  app.use(healthRoutes(deps.storage, inflight));
  app.use(rateLimits(deps.rateLimitStore, deps.rateLimits));
  app.use(docsRoutes(deps.openapi));
  app.use(deps.dispatch);
  return { app, inflight };
}
