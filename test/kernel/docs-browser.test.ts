import fs from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKernel, type TestKernel } from '../harness/index.ts';

/**
 * The docs pages in a real browser: Debian's Chromium, driven by playwright-core (no browser
 * download). Listing a page's assets misses what its scripts ask for at run time (Redoc's logo
 * came from a CDN) and what the browser asks for unprompted (/favicon.ico); only a browser shows
 * every request and every console message, CSP violations included.
 */
const CHROMIUM = '/usr/bin/chromium';
const haveChromium = fs.existsSync(CHROMIUM);
if (!haveChromium) console.warn(`\n!!! ${CHROMIUM} is missing: the docs pages' browser check is SKIPPED (apt-get install -y chromium; .ci/run installs it) !!!\n`);

interface Visit {
  requests: string[];
  failed: string[];
  console: string[];
}

/** Opens `path` and records every request, every failed or 4xx/5xx answer and every console error until the page is idle. */
async function visit(browser: Browser, url: string, path: string, rendered: (page: Page) => Promise<void>): Promise<Visit> {
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

function expectClean(seen: Visit, origin: string) {
  expect(seen.requests.length).toBeGreaterThan(0);
  expect(seen.requests.filter((request) => new URL(request).origin !== origin)).toEqual([]);
  expect(seen.failed).toEqual([]);
  expect(seen.console).toEqual([]);
}

// The pages do not touch the database: one adapter is enough.
describe.skipIf(!haveChromium)('docs pages in Chromium', () => {
  let t: TestKernel;
  let browser: Browser;
  let origin: string;
  let title: string;

  beforeAll(async () => {
    t = await startTestKernel({ dialect: 'sqlite' });
    origin = new URL(t.url).origin;
    title = (await t.request('GET', '/openapi.json')).body.info.title;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it('Swagger UI at /docs renders the API and its operations from the server alone', async () => {
    const seen = await visit(browser, t.url, '/docs', async (page) => {
      await page.locator('.opblock').first().waitFor();
      expect(await page.locator('.info .title').textContent()).toContain(title);
      expect(await page.locator('.opblock').count()).toBeGreaterThan(0);
    });
    expect(seen.requests).toContain(`${origin}/openapi.json`);
    expectClean(seen, origin);
  });

  it('Redoc at /redoc renders the API and its operations from the server alone, its logo included', async () => {
    const seen = await visit(browser, t.url, '/redoc', async (page) => {
      await page.locator('h1').first().waitFor();
      expect(await page.locator('h1').first().textContent()).toContain(title);
      expect(await page.locator('[data-section-id^="operation/"]').count()).toBeGreaterThan(0);
      await page.locator('img[alt="redocly logo"]').waitFor();
    });
    expect(seen.requests).toContain(`${origin}/redoc/assets/logo.svg`);
    expectClean(seen, origin);
  });

  it('/favicon.ico is an image the browser draws, with a long cache', async () => {
    const page = await browser.newPage();
    try {
      const response = (await page.goto(`${t.url}/favicon.ico`))!;
      expect(response.status()).toBe(200);
      expect(response.headers()['content-type']).toBe('image/svg+xml');
      expect(Number(/max-age=(\d+)/.exec(response.headers()['cache-control'] ?? '')?.[1])).toBeGreaterThanOrEqual(86_400 * 7);
      // Drawn as an image: the browser knows its size.
      expect(await page.evaluate(() => document.querySelector('svg')?.getBoundingClientRect().width)).toBeGreaterThan(0);
    } finally {
      await page.close();
    }
  });
});
