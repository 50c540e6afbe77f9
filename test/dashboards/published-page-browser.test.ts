import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, expectClean, haveChromium, visit } from '../harness/browser.ts';
import { DIALECTS, REPO_ROOT, startTestKernel, type TestKernel } from '../harness/index.ts';

/** Where the screenshots of the published page are kept after a run (not committed). */
const ARTIFACTS = path.join(REPO_ROOT, 'test', 'artifacts');

const at = (minutes: number) => new Date(Date.UTC(2026, 10, 2, 9, minutes)).toISOString();
/** A small order process: received → checked → (approved | rejected) → shipped, over 8 cases. */
const EVENTS: [string, string, number, string, number][] = [];
for (let i = 1; i <= 8; i += 1) {
  const region = i % 2 ? 'EU' : 'US';
  const steps = i % 4 === 0 ? ['received', 'checked', 'rejected'] : ['received', 'checked', 'approved', 'shipped'];
  steps.forEach((step, j) => EVENTS.push([`o${i}`, step, i * 3 + j * (5 + i), region, 10 * i]));
}
const CSV = `order_id,step,at,region,amount\n${EVENTS.map(([o, s, m, r, a]) => `${o},${s},${at(m)},${r},${a}`).join('\n')}\n`;

/** Issue 18, "Published dashboard pages": the page of a share link, in headless Chromium. */
describe.skipIf(!haveChromium).each(DIALECTS)('a published dashboard in Chromium (%s)', (dialect) => {
  let t: TestKernel;
  let browser: Browser;
  let token: string;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    await t.request('PUT', '/api/branding', { body: { display_name: 'Acme Fulfilment', primary_color: '#0b3d5c', accent_color: '#e07a1f' } });
    const logo = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 40 40"><circle cx="20" cy="20" r="18" fill="#e07a1f"/><path d="M12 26 20 10 28 26z" fill="#0b3d5c"/></svg>';
    expect((await t.request('PUT', '/api/branding/logo', { body: logo, headers: { 'content-type': 'image/svg+xml' } })).status).toBe(200);
    const project = await t.request('POST', '/api/projects', { body: { key: 'OPS', name: 'Operations' } });
    const columns = [
      { name: 'order_id', type: 'string' },
      { name: 'step', type: 'string' },
      { name: 'at', type: 'timestamp' },
      { name: 'region', type: 'string' },
      { name: 'amount', type: 'number' },
    ];
    const dataset = await t.request('POST', '/api/datasets', { body: { project_id: project.body.id, name: 'order_steps', columns } });
    expect((await t.request('POST', `/api/datasets/${dataset.body.id}/data`, { body: CSV, headers: { 'content-type': 'text/csv' } })).status).toBe(200);
    const ds = dataset.body.id;
    const created = await t.request('POST', '/api/dashboards', {
      body: {
        project_id: project.body.id,
        name: 'Order fulfilment',
        description: 'How orders move from received to shipped',
        filters: [{ column: 'region', label: 'Region' }],
        cards: [
          { type: 'metric', title: 'Orders', layout: { x: 0, y: 0, w: 6, h: 3 }, config: { dataset_id: ds, aggregation: 'count_distinct', column: 'order_id' } },
          { type: 'metric', title: 'Amount', layout: { x: 6, y: 0, w: 6, h: 3 }, config: { dataset_id: ds, aggregation: 'sum', column: 'amount' } },
          { type: 'text', title: 'About', layout: { x: 12, y: 0, w: 12, h: 3 }, config: { markdown: '**Rejected** orders stop after the check. See [the runbook](https://example.test/runbook).' } },
          { type: 'process_map', title: 'Process map', layout: { x: 0, y: 3, w: 14, h: 8 }, config: { dataset_id: ds, case_column: 'order_id', activity_column: 'step', timestamp_column: 'at' } },
          { type: 'chart', title: 'Steps per region', layout: { x: 14, y: 3, w: 10, h: 8 }, config: { dataset_id: ds, chart: 'bar', x: 'step', series: 'region' } },
          { type: 'chart', title: 'Amount by order', layout: { x: 0, y: 11, w: 8, h: 6 }, config: { dataset_id: ds, chart: 'line', x: 'order_id', y: 'amount', aggregation: 'max' } },
          { type: 'chart', title: 'Share of steps', layout: { x: 8, y: 11, w: 8, h: 6 }, config: { dataset_id: ds, chart: 'pie', x: 'step' } },
          { type: 'table', title: 'Latest steps', layout: { x: 16, y: 11, w: 8, h: 6 }, config: { dataset_id: ds, columns: ['order_id', 'step', 'region'], sort: [{ column: 'at', direction: 'desc' }], limit: 5 } },
        ],
      },
    });
    expect(created.status, created.text).toBe(201);
    const link = await t.request('POST', `/api/dashboards/${created.body.id}/publish`, { body: {} });
    expect(link.status, link.text).toBe(201);
    token = link.body.token;
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  it('renders every card from the server alone, with no console error, and keeps a screenshot', async () => {
    const origin = new URL(t.url).origin;
    let shot: Buffer | undefined;
    const seen = await visit(browser, t.url, `/p/dashboards/${token}`, async (page) => {
      await page.setViewportSize({ width: 1400, height: 1000 });
      await page.locator('body[data-rendered="true"]').waitFor();
      expect(await page.locator('section.card').count()).toBe(8);
      expect(await page.locator('section.card .card-error').count()).toBe(0);
      expect(await page.locator('.brand-name').textContent()).toBe('Acme Fulfilment');
      expect(await page.locator('img.logo').evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth > 0)).toBe(true);
      expect(await page.locator('section[data-card-type="metric"] .metric-value').allTextContents()).toEqual(['8', '1,320']);
      expect(await page.locator('section[data-card-type="text"] strong').textContent()).toBe('Rejected');
      // Charts and the process map are drawn on canvases of a real size.
      for (const type of ['process_map', 'chart']) {
        const sizes = await page.locator(`section[data-card-type="${type}"] canvas`).evaluateAll((canvases: HTMLCanvasElement[]) => canvases.map((c) => c.width * c.height));
        expect(sizes.length, type).toBeGreaterThan(0);
        for (const size of sizes) expect(size, type).toBeGreaterThan(10_000);
      }
      expect(await page.locator('section[data-card-type="process_map"] .metric-label').textContent()).toBe('8 cases');
      expect(await page.locator('section[data-card-type="table"] tbody tr').count()).toBe(5);
      // The page's colours are the organization's.
      expect(await page.evaluate(() => getComputedStyle(document.querySelector('.brand')!).backgroundColor)).toBe('rgb(11, 61, 92)');
      shot = await page.screenshot({ fullPage: true });
    });
    expectClean(seen, origin);
    expect(seen.requests).toEqual(expect.arrayContaining([expect.stringMatching(new RegExp(`^${origin}/p/dashboards/assets/[0-9a-f]{16}/echarts\\.min\\.js$`)), expect.stringMatching(/\/page\.js$/), `${origin}/p/dashboards/${token}/logo`]));
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    fs.writeFileSync(path.join(ARTIFACTS, `published-dashboard-${dialect}.png`), shot!);
    expect(shot!.length).toBeGreaterThan(20_000);
  });

  it('a revoked link is a 404 in the browser too', async () => {
    const dashboards = await t.request('GET', '/api/dashboards');
    const other = await t.request('POST', `/api/dashboards/${dashboards.body.items[0].id}/publish`, { body: {} });
    expect((await t.request('DELETE', `/api/dashboards/${dashboards.body.items[0].id}/publish/${other.body.id}`)).status).toBe(204);
    const page = await browser.newPage();
    try {
      const response = (await page.goto(`${t.url}/p/dashboards/${other.body.token}`))!;
      expect(response.status()).toBe(404);
    } finally {
      await page.close();
    }
  });
});
