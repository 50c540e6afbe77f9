import type { Context, Middleware } from 'koa';

/**
 * The headers OWASP's REST Security Cheat Sheet asks of every API answer: no sniffing, no framing,
 * nothing loaded should a JSON answer ever be rendered, and no caching of what may be sensitive.
 * Set on the Node response directly, once per request (each header costs every answer), named in
 * lower case as HTTP/2 writes them: Node files a header under its lower-cased name, and a name
 * already in lower case is filed as is, without a new string per answer.
 */
const API_HEADERS: [string, string][] = [
  ['x-content-type-options', 'nosniff'],
  ['x-frame-options', 'DENY'],
  ['content-security-policy', "default-src 'none'; frame-ancestors 'none'"],
  ['cache-control', 'no-store'],
];

/**
 * Security headers on every answer. The documentation pages are documents, not API answers: they
 * widen the CSP for their own assets and add the headers that only matter to a document in a
 * browser window (see `documentHeaders`).
 * (This and the other pass-through middlewares return `next()` rather than awaiting it: an async
 * frame per middleware per request is measurable at the throughput the platform aims for.)
 */
export function securityHeaders(): Middleware {
  return (ctx, next) => {
    const res = ctx.res;
    for (const [name, value] of API_HEADERS) res.setHeader(name, value);
    return next();
  };
}

/** CSP of the documentation pages: scripts, styles and workers from this server only. */
const DOCS_CSP =
  "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; font-src 'self' data:; frame-ancestors 'none'";

/** Headers of a documentation page or asset: its own CSP, no referrer, isolated browsing context. */
export function documentHeaders(ctx: Context, cache: string): void {
  ctx.set('Content-Security-Policy', DOCS_CSP);
  ctx.set('Referrer-Policy', 'no-referrer');
  ctx.set('Cross-Origin-Opener-Policy', 'same-origin');
  ctx.set('Cross-Origin-Resource-Policy', 'same-origin');
  ctx.set('Cache-Control', cache);
}
