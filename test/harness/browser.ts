import fs from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { expect } from 'vitest';

/**
 * Pages in a real browser: Debian's Chromium, driven by playwright-core (no browser download).
 * Listing a page's assets misses what its scripts ask for at run time and what the browser asks
 * for unprompted (/favicon.ico); only a browser shows every request and every console message,
 * CSP violations included.
 */
export const CHROMIUM = '/usr/bin/chromium';
export const haveChromium = fs.existsSync(CHROMIUM);
if (!haveChromium) console.warn(`\n!!! ${CHROMIUM} is missing: the browser checks of pages are SKIPPED (apt-get install -y chromium; .ci/run installs it) !!!\n`);

export interface Visit {
  requests: string[];
  failed: string[];
  console: string[];
}

/** Opens `path` and records every request, every failed or 4xx/5xx answer and every console error until the page is idle. */
export async function visit(browser: Browser, url: string, path: string, rendered: (page: Page) => Promise<void>): Promise<Visit> {
  const page = await browser.newPage();
  const seen: Visit = { requests: [], failed: [], console: [] };
  page.on('request', (request) => seen.requests.push(request.url()));
  page.on('requestfailed', (request) => seen.failed.push(`${request.url()}: ${request.failure()?.errorText}`));
  page.on('response', (response) => {
    if (response.status() >= 400) seen.failed.push(`${response.url()}: ${response.status()}`);
  });
  // Every error, and the warnings of the browser's security checks (a CSP violation is reported as
  // an error, its report-only form as a warning); libraries' own warnings about a schema are not the page's fault.
  page.on('console', (message) => {
    if (message.type() === 'error' || (message.type() === 'warning' && /Content Security Policy|CSP|Refused to/i.test(message.text()))) seen.console.push(`${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (err) => seen.console.push(`uncaught: ${err.message}`));
  try {
    await page.goto(`${url}${path}`, { waitUntil: 'networkidle' });
    await rendered(page);
    // Rendering may have asked for more (Redoc's logo): let those requests settle too.
    await page.waitForLoadState('networkidle');
  } finally {
    await page.close();
  }
  return seen;
}

export function expectClean(seen: Visit, origin: string) {
  expect(seen.requests.length).toBeGreaterThan(0);
  expect(seen.requests.filter((request) => new URL(request).origin !== origin)).toEqual([]);
  expect(seen.failed).toEqual([]);
  expect(seen.console).toEqual([]);
}
