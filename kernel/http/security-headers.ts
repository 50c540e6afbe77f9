import type { Context } from 'koa';

/**
 * The headers OWASP's REST Security Cheat Sheet asks of every API answer: no sniffing, no framing,
 * nothing loaded should a JSON answer ever be rendered, and no caching of what may be sensitive.
 * Added to every answer as its head is written (kernel-response.ts), unless the answer set its own:
 * the documentation pages are documents, not API answers, and set a wider CSP for their own assets
 * and the headers that only matter to a document in a browser window (`documentHeaders`).
 * One flat list of names and values, in lower case as HTTP/2 writes them.
 */
export const API_HEADERS: readonly string[] = [
  'x-content-type-options',
  'nosniff',
  'x-frame-options',
  'DENY',
  'content-security-policy',
  "default-src 'none'; frame-ancestors 'none'",
  'cache-control',
  'no-store',
];

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
