import type { Context } from 'koa';
import { problems } from '../problem.ts';
import type { RateLimitStore } from '../rate-limit/rate-limit-store.ts';
import type { RequestState } from './state.ts';

export interface RateLimitSettings {
  /** Requests per second per client address on /api/auth/*; 0 = off. */
  authPerSecond: number;
  /** Requests per second per client address on the rest of /api/ and on plugins' pages (/p/); 0 = off. */
  apiPerSecond: number;
}

const retryAfter = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

/** Whether a path counts against the auth bucket (its refusal is a 503) rather than the general /api/ one (429). */
export const inAuthBucket = (path: string) => path.startsWith('/api/auth/') || path === '/api/auth';

/** Whether a path outside the auth bucket counts against the general one: /api/, and plugins' pages (/p/: a published dashboard, open to anyone with its link). */
export const inGeneralBucket = (path: string) => path.startsWith('/api/') || path.startsWith('/p/');

/**
 * The spec's two client-address buckets (§8), applied in the app: the auth bucket answers 503 as
 * the spec's reverse proxy does, the general /api/ bucket 429. Both carry Retry-After. The step
 * answers the check to wait for before going on (refused: a rejection), or nothing when no bucket
 * counts the request.
 */
export function rateLimits(store: RateLimitStore, settings: RateLimitSettings): (ctx: Context & { state: RequestState }) => Promise<void> | undefined {
  const limited = async (ip: string, auth: boolean) => {
    if (auth) {
      const decision = await store.take(`auth:${ip}`, settings.authPerSecond, 1000);
      if (!decision.allowed) throw problems.unavailable('too many authentication requests from this address; retry later', retryAfter(decision.retryAfterMs));
    } else {
      const decision = await store.take(`api:${ip}`, settings.apiPerSecond, 1000);
      if (!decision.allowed) throw problems.tooManyRequests('too many requests from this address; retry later', retryAfter(decision.retryAfterMs));
    }
  };
  return (ctx) => {
    const path = ctx.state.path;
    const auth = inAuthBucket(path);
    if (auth ? settings.authPerSecond > 0 : settings.apiPerSecond > 0 && inGeneralBucket(path)) return limited(ctx.state.ip, auth);
    return undefined;
  };
}
