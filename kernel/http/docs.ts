import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { Context } from 'koa';
import { koaSwagger } from 'koa2-swagger-ui';
import { documentHeaders } from './security-headers.ts';
import type { RequestState } from './state.ts';

const require = createRequire(import.meta.url);
const swaggerDist = path.dirname(require.resolve('swagger-ui-dist/package.json'));
const redocBundle = require.resolve('redoc/bundles/redoc.standalone.js');

/** The platform's icon: a small SVG served as /favicon.ico (browsers ask for it unprompted) and as Redoc's logo. */
const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1f4e79"/><ellipse cx="16" cy="9" rx="9" ry="3.5" fill="#fff"/><path d="M7 9v14c0 1.9 4 3.5 9 3.5s9-1.6 9-3.5V9" fill="none" stroke="#fff" stroke-width="2"/><path d="M7 16c0 1.9 4 3.5 9 3.5s9-1.6 9-3.5" fill="none" stroke="#fff" stroke-width="2"/></svg>`;
const ICON = Buffer.from(ICON_SVG);
const REDOC_LOGO_PATH = '/redoc/assets/logo.svg';
const REDOC_BUNDLE_PATH = '/redoc/assets/redoc.standalone.js';

/**
 * Redoc 2 shows a "by Redocly" logo fetched from its CDN, whatever its options say; the CSP blocks
 * it (a console error) and these machines have no internet anyway. The bundle is served with that
 * address pointing at the platform's own icon: read and rewritten once, on first request.
 */
const REDOC_CDN_LOGO = 'https://cdn.redoc.ly/redoc/logo-mini.svg';
let redocSource: Promise<string> | undefined;
const redocBundleText = () => (redocSource ??= fs.promises.readFile(redocBundle, 'utf8').then((text) => text.replaceAll(REDOC_CDN_LOGO, REDOC_LOGO_PATH)));

/** Files the docs pages load, served by the platform itself: these machines have no internet. */
const ASSETS: Record<string, { file: string; type: string }> = {
  '/docs/assets/swagger-ui/swagger-ui.min.css': { file: path.join(swaggerDist, 'swagger-ui.css'), type: 'text/css' },
  '/docs/assets/swagger-ui/swagger-ui-bundle.js': { file: path.join(swaggerDist, 'swagger-ui-bundle.js'), type: 'application/javascript' },
  '/docs/assets/swagger-ui/swagger-ui-standalone-preset.js': { file: path.join(swaggerDist, 'swagger-ui-standalone-preset.js'), type: 'application/javascript' },
  '/docs/assets/swagger-ui/favicon-32x32.png': { file: path.join(swaggerDist, 'favicon-32x32.png'), type: 'image/png' },
};

const REDOC_PAGE = `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Data Platform API</title><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" type="image/svg+xml" href="/favicon.ico"></head>
<body><redoc spec-url="/openapi.json"></redoc><script src="${REDOC_BUNDLE_PATH}"></script></body>
</html>`;

// koa2-swagger-ui's page template links a web font from a CDN; the page works without it.
const CDN_FONT_LINK = /<link[^>]+fonts\.googleapis\.com[^>]*>\s*/g;

/** Every path the docs answer: any other passes on, without a promise. */
const DOCS_PATHS: ReadonlySet<string> = new Set(['/openapi.json', '/docs', '/docs/', '/redoc', REDOC_BUNDLE_PATH, '/favicon.ico', REDOC_LOGO_PATH, ...Object.keys(ASSETS)]);

/**
 * /openapi.json, /docs (Swagger UI), /redoc, their assets and /favicon.ico. The step answers a GET
 * or HEAD of one of those paths, or nothing for any other request.
 */
export function docsRoutes(openapi: () => Record<string, unknown>): (ctx: Context) => Promise<void> | undefined {
  const swagger = koaSwagger({
    routePrefix: '/docs',
    title: 'Data Platform API',
    swaggerCdnUrl: '/docs/assets',
    swaggerVersion: 'swagger-ui',
    favicon: '/docs/assets/swagger-ui/favicon-32x32.png',
    // validatorUrl: null, else Swagger UI shows a badge image from validator.swagger.io on any non-localhost host
    swaggerOptions: { url: '/openapi.json', validatorUrl: null },
  });
  const page = (ctx: Context, html: string) => {
    ctx.type = 'text/html; charset=utf-8';
    documentHeaders(ctx, 'no-cache');
    ctx.body = html;
  };

  const serve = async (ctx: Context, requested: string) => {
    if (requested === '/openapi.json') {
      ctx.body = openapi();
      return;
    }
    if (requested === '/docs' || requested === '/docs/') {
      await swagger(ctx, async () => undefined);
      page(ctx, String(ctx.body).replace(CDN_FONT_LINK, ''));
      return;
    }
    if (requested === '/redoc') return page(ctx, REDOC_PAGE);
    if (requested === REDOC_BUNDLE_PATH) {
      ctx.type = 'application/javascript';
      documentHeaders(ctx, 'public, max-age=86400');
      ctx.body = await redocBundleText();
      return;
    }
    if (requested === '/favicon.ico' || requested === REDOC_LOGO_PATH) {
      ctx.type = 'image/svg+xml';
      // Browsers ask for a favicon with every page they open: a month of cache (it changes with a release at most).
      documentHeaders(ctx, 'public, max-age=2592000');
      ctx.body = ICON;
      return;
    }
    const asset = ASSETS[requested];
    ctx.type = asset.type;
    documentHeaders(ctx, 'public, max-age=86400');
    ctx.body = fs.createReadStream(asset.file);
  };
  return (ctx) => {
    const { method, path: requested } = ctx.state as RequestState;
    if ((method !== 'GET' && method !== 'HEAD') || !DOCS_PATHS.has(requested)) return undefined;
    return serve(ctx, requested);
  };
}
