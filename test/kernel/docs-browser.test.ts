import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, expectClean, haveChromium, visit } from '../harness/browser.ts';
import { startTestKernel, type TestKernel } from '../harness/index.ts';

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
