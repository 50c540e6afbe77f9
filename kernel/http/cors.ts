import type { Context } from 'koa';
import { problems } from '../problem.ts';
import type { RequestState } from './state.ts';

const ALLOWED_HEADERS = 'Authorization, Content-Type, X-Org-Id, X-API-Key, X-Request-Id';
const EXPOSED_HEADERS = 'X-Request-Id, Retry-After, Location';
const PREFLIGHT_MAX_AGE_S = '600';

/**
 * CORS for the origins in CORS_ALLOWED_ORIGINS only (spec §5.13). Any other origin gets no allow
 * header, and its preflight is refused. Credentials are bearer tokens, never cookies, so
 * Access-Control-Allow-Credentials is not sent. The step answers a preflight (true), or adds the
 * allow headers to the answer to come (false).
 */
export function cors(allowedOrigins: readonly string[]): (ctx: Context) => boolean {
  const allowed = new Set(allowedOrigins.map((o) => o.replace(/\/$/, '')));
  return (ctx) => {
    const state = ctx.state as RequestState;
    const origin = state.header('origin');
    if (!origin) return false;
    ctx.vary('Origin');
    const isAllowed = allowed.has(origin);
    const isPreflight = state.method === 'OPTIONS' && !!ctx.get('Access-Control-Request-Method');
    if (isPreflight) {
      if (!isAllowed) throw problems.forbidden(`origin ${origin} is not allowed (CORS_ALLOWED_ORIGINS)`);
      ctx.set('Access-Control-Allow-Origin', origin);
      ctx.set('Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE, OPTIONS');
      ctx.set('Access-Control-Allow-Headers', ALLOWED_HEADERS);
      ctx.set('Access-Control-Max-Age', PREFLIGHT_MAX_AGE_S);
      ctx.status = 204;
      return true;
    }
    if (isAllowed) {
      ctx.set('Access-Control-Allow-Origin', origin);
      ctx.set('Access-Control-Expose-Headers', EXPOSED_HEADERS);
    }
    return false;
  };
}
