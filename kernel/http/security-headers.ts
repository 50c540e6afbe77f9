import type { Middleware } from 'koa';

const API_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'";

/**
 * Security headers on every answer. Pages (the docs) widen the CSP for their own assets only.
 * (This and the other pass-through middlewares return `next()` rather than awaiting it: an async
 * frame per middleware per request is measurable at the throughput the platform aims for.)
 */
export function securityHeaders(): Middleware {
  return (ctx, next) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Referrer-Policy', 'no-referrer');
    ctx.set('Cross-Origin-Opener-Policy', 'same-origin');
    ctx.set('Cross-Origin-Resource-Policy', 'same-origin');
    ctx.set('Content-Security-Policy', API_CSP);
    return next();
  };
}

/** CSP of the documentation pages: scripts, styles and workers from this server only. */
export const DOCS_CSP =
  "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; font-src 'self' data:; frame-ancestors 'none'";
