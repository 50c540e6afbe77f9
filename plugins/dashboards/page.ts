import crypto from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { escapeHtml } from '../../kernel/plugin-api.ts';
import type { ShownBranding } from '../branding/public.ts';
import type { Card, Dashboard } from './dashboard-store.ts';

/** One card as the page draws it: its data, or why it could not be computed. */
export interface PageCard {
  id: number;
  type: string;
  title: string | null;
  layout: Card['layout'];
  data: Record<string, unknown> | null;
  error: string | null;
}

/**
 * The page's CSP: scripts, styles and images from this server only (the charting library is served
 * here, no CDN), no inline script or style, no connection anywhere (the data is in the page), no
 * framing, no form, no base URL.
 */
export const PAGE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const here = path.dirname(new URL(import.meta.url).pathname);

/** The files a page loads from this server, by the name in their URL. */
const PAGE_ASSET_FILES: Record<string, { file: string; type: string }> = {
  'echarts.min.js': { file: createRequire(import.meta.url).resolve('echarts/dist/echarts.min.js'), type: 'text/javascript; charset=utf-8' },
  'page.js': { file: path.join(here, 'page', 'page.js'), type: 'text/javascript; charset=utf-8' },
  'page.css': { file: path.join(here, 'page', 'page.css'), type: 'text/css; charset=utf-8' },
};

interface PageAsset {
  body: Buffer;
  type: string;
  /** The start of the content's SHA-256, in the asset's URL: a changed file has a new URL, so browsers may keep one for a year. */
  version: string;
}

/** The assets, read once (a few files, served to every viewer). */
const assets = new Map<string, PageAsset>();
function asset(name: string): PageAsset | null {
  const source = Object.hasOwn(PAGE_ASSET_FILES, name) ? PAGE_ASSET_FILES[name] : undefined;
  if (!source) return null;
  let found = assets.get(name);
  if (!found) {
    const body = fs.readFileSync(source.file);
    assets.set(name, (found = { body, type: source.type, version: crypto.createHash('sha256').update(body).digest('hex').slice(0, 16) }));
  }
  return found;
}

/** The asset of that name and version, or null: an old version is not served (its URL names content gone). */
export function pageAsset(version: string, name: string): PageAsset | null {
  const found = asset(name);
  return found && found.version === version ? found : null;
}

/** The URL of an asset relative to a page (`/p/dashboards/<token>`). */
const assetUrl = (name: string) => `assets/${asset(name)!.version}/${name}`;


/** JSON inside a `<script type="application/json">`: nothing in it can close the element or start markup. */
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

/**
 * The published dashboard as one HTML document: the organization's branding, and each card's data
 * as the publisher sees it, carried in a JSON block that `page.js` draws (ECharts for charts and the
 * process map). Every text from the database is escaped; the Markdown cards' HTML was sanitized
 * when it was computed.
 */
export function renderPage(token: string, dashboard: Dashboard, cards: PageCard[], branding: ShownBranding, hasLogo: boolean, computedAt: string): string {
  const brand = branding.shown_name;
  const payload = { name: dashboard.name, description: dashboard.description, colors: { primary: branding.primary_color, accent: branding.accent_color }, computed_at: computedAt, cards };
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex">
<title>${escapeHtml(dashboard.name)} \u00b7 ${escapeHtml(brand)}</title>
<link rel="stylesheet" href="${assetUrl('page.css')}">
</head>
<body>
<header class="brand">${hasLogo ? `<img class="logo" src="${escapeHtml(token)}/logo" alt="">` : ''}<span class="brand-name">${escapeHtml(brand)}</span></header>
<main>
<h1>${escapeHtml(dashboard.name)}</h1>
${dashboard.description ? `<p class="description">${escapeHtml(dashboard.description)}</p>` : ''}
<div class="grid" id="grid"></div>
</main>
<footer>Data as of <time datetime="${computedAt}">${computedAt.replace('T', ' ').slice(0, 16)} UTC</time></footer>
<script type="application/json" id="dashboard-data">${scriptJson(payload)}</script>
<script src="${assetUrl('echarts.min.js')}"></script>
<script src="${assetUrl('page.js')}"></script>
</body>
</html>
`;
}
