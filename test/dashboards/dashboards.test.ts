import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { expectProblem } from '../harness/answers.ts';

/**
 * An event log whose directly-follows graph is known by hand (times in minutes after 09:00):
 * c1 A0 B10 C30, c2 A0 B20 C25 (EU); c3 A0 C60, c4 A0 B5 B6 C16 (US).
 */
const EVENTS = [
  ['c1', 'A', 0, 'EU', 10, 'ann@example.test'],
  ['c1', 'B', 10, 'EU', 20, 'ann@example.test'],
  ['c1', 'C', 30, 'EU', 30, 'ann@example.test'],
  ['c2', 'A', 0, 'EU', 5, 'bob@example.test'],
  ['c2', 'B', 20, 'EU', 5, 'bob@example.test'],
  ['c2', 'C', 25, 'EU', 5, 'bob@example.test'],
  ['c3', 'A', 0, 'US', 100, 'cy@example.test'],
  ['c3', 'C', 60, 'US', 100, 'cy@example.test'],
  ['c4', 'A', 0, 'US', 1, 'di@example.test'],
  ['c4', 'B', 5, 'US', 1, 'di@example.test'],
  ['c4', 'B', 6, 'US', 1, 'di@example.test'],
  ['c4', 'C', 16, 'US', 1, 'di@example.test'],
] as const;
const at = (minutes: number) => new Date(Date.UTC(2026, 10, 2, 9, minutes)).toISOString();
const EVENTS_CSV = `case_id,activity,at,region,amount,email\n${EVENTS.map(([c, a, m, r, amount, e]) => `${c},${a},${at(m)},${r},${amount},${e}`).join('\n')}\n`;

/** Issue 18, "Dashboards": through HTTP on both adapters. */
describe.each(DIALECTS)('dashboards (%s)', (dialect) => {
  let t: TestKernel;
  const logLines: string[] = [];
  let projectId: number;
  let eventsId: number;
  let viewer: { id: number; token: string };
  let other: { orgId: number; token: string };

  const processMap = { type: 'process_map', title: 'Order flow', config: { dataset_id: 0, case_column: 'case_id', activity_column: 'activity', timestamp_column: 'at' } };
  const create = (body: Record<string, unknown>, token?: string) => t.request('POST', '/api/dashboards', { body: { project_id: projectId, name: 'Ops', ...body }, ...(token ? { token } : {}) });
  const data = (dashboard: number, card: number, query = '', token?: string) => t.request('GET', `/api/dashboards/${dashboard}/cards/${card}/data${query}`, token ? { token } : {});

  beforeAll(async () => {
    t = await startTestKernel({ dialect, logLines });
    viewer = await t.userToken('viewer');
    other = await t.outsider('dashboards-outsider');
    const project = await t.request('POST', '/api/projects', { body: { key: 'DASH', name: 'Dashboards' } });
    projectId = project.body.id;
    const columns = [
      { name: 'case_id', type: 'string' },
      { name: 'activity', type: 'string' },
      { name: 'at', type: 'timestamp' },
      { name: 'region', type: 'string' },
      { name: 'amount', type: 'number' },
      { name: 'email', type: 'string', pii: true },
    ];
    const dataset = await t.request('POST', '/api/datasets', { body: { project_id: projectId, name: 'order_events', columns } });
    expect(dataset.status, dataset.text).toBe(201);
    eventsId = dataset.body.id;
    const upload = await t.request('POST', `/api/datasets/${eventsId}/data`, { body: EVENTS_CSV, headers: { 'content-type': 'text/csv' } });
    expect(upload.status, upload.text).toBe(200);
    processMap.config.dataset_id = eventsId;
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('lists the built-in card types with their config schemas', async () => {
    const res = await t.request('GET', '/api/dashboards/card-types', { token: viewer.token });
    expect(res.status, res.text).toBe(200);
    expect(res.body.items.map((c: { type: string }) => c.type)).toEqual(['chart', 'metric', 'process_map', 'table', 'text']);
    const map = res.body.items.find((c: { type: string }) => c.type === 'process_map');
    expect(map).toMatchObject({ plugin_id: 'card_process_map', config: { required: ['dataset_id', 'case_column', 'activity_column', 'timestamp_column'] } });
  });

  it('computes the process map in the database: nodes, edges with mean and median durations, start and end activities, cases', async () => {
    const created = await create({ cards: [processMap] });
    expect(created.status, created.text).toBe(201);
    const [card] = created.body.cards;
    expect(card).toMatchObject({ id: expect.any(Number), type: 'process_map', title: 'Order flow', layout: { x: 0, y: 0, w: 12, h: 6 } });
    const res = await data(created.body.id, card.id);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ card_id: card.id, type: 'process_map' });
    expect(res.body.data).toEqual({
      nodes: [
        { activity: 'A', count: 4 },
        { activity: 'B', count: 4 },
        { activity: 'C', count: 4 },
      ],
      edges: [
        { from: 'A', to: 'B', count: 3, mean_duration_s: 700, median_duration_s: 600 },
        { from: 'B', to: 'C', count: 3, mean_duration_s: 700, median_duration_s: 600 },
        { from: 'A', to: 'C', count: 1, mean_duration_s: 3600, median_duration_s: 3600 },
        { from: 'B', to: 'B', count: 1, mean_duration_s: 60, median_duration_s: 60 },
      ],
      start_activities: [{ activity: 'A', count: 4 }],
      end_activities: [{ activity: 'C', count: 4 }],
      cases: 4,
      truncated: false,
    });

    // Rare edges left out; a dashboard filter narrows the log (an even count: the median is the mean of the middle two).
    const rare = await t.request('PATCH', `/api/dashboards/${created.body.id}/cards/${card.id}`, { body: { config: { ...processMap.config, min_edge_count: 2 } } });
    expect(rare.status, rare.text).toBe(200);
    await t.request('PATCH', `/api/dashboards/${created.body.id}`, { body: { filters: [{ column: 'region', label: 'Region' }] } });
    const narrowed = await data(created.body.id, card.id, '?region=EU');
    expect(narrowed.status, narrowed.text).toBe(200);
    expect(narrowed.body.data.edges).toEqual([
      { from: 'A', to: 'B', count: 2, mean_duration_s: 900, median_duration_s: 900 },
      { from: 'B', to: 'C', count: 2, mean_duration_s: 750, median_duration_s: 750 },
    ]);
    expect(narrowed.body.data.cases).toBe(2);

    const csv = await t.request('GET', `/api/dashboards/${created.body.id}/cards/${card.id}/export?region=EU`);
    expect(csv.status, csv.text).toBe(200);
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(csv.text).toBe('from,to,count,mean_duration_s,median_duration_s\nA,B,2,900,900\nB,C,2,750,750\n');
  });

  it('computes metric, table and chart cards, filtered; a metric of a governed query; text as sanitized HTML', async () => {
    const created = await create({
      filters: [{ column: 'region' }, { column: 'activity', label: 'Step' }],
      cards: [
        { type: 'metric', title: 'Cases', config: { dataset_id: eventsId, aggregation: 'count_distinct', column: 'case_id' } },
        { type: 'table', config: { dataset_id: eventsId, columns: ['case_id', 'activity', 'amount'], sort: [{ column: 'amount', direction: 'desc' }, { column: 'case_id' }, { column: 'activity' }], limit: 3 } },
        { type: 'chart', config: { dataset_id: eventsId, chart: 'bar', x: 'activity', y: 'amount', aggregation: 'sum', series: 'region' } },
        { type: 'metric', config: { query: { sql: 'select max(amount) as top from order_events where region = $1', params: ['EU'] } } },
        { type: 'text', config: { markdown: '# Ops\n\n**Bold** [docs](https://example.test) [bad](javascript:alert(1)) <script>alert(1)</script><img src="https://tracker.example/x.png"> <b onclick="x()">b</b>' } },
      ],
    });
    expect(created.status, created.text).toBe(201);
    const [metric, table, chart, query, text] = created.body.cards.map((c: { id: number }) => c.id);
    // Cards without a layout are stacked.
    expect(created.body.cards.map((c: { layout: { y: number } }) => c.layout.y)).toEqual([0, 6, 12, 18, 24]);
    const id = created.body.id;

    expect((await data(id, metric)).body.data).toEqual({ value: 4, label: 'count_distinct(case_id)' });
    expect((await data(id, metric, '?region=EU')).body.data.value).toBe(2);
    expect((await data(id, metric, '?activity=A&activity=B&region=US')).body.data.value).toBe(2);

    const rows = await data(id, table);
    expect(rows.body.data).toEqual({
      columns: [
        { name: 'case_id', type: expect.any(String) },
        { name: 'activity', type: expect.any(String) },
        { name: 'amount', type: expect.any(String) },
      ],
      rows: [
        ['c3', 'A', 100],
        ['c3', 'C', 100],
        ['c1', 'C', 30],
      ],
      truncated: true,
    });

    const bars = await data(id, chart);
    expect(bars.body.data).toEqual({
      chart: 'bar',
      x: 'activity',
      y: 'sum(amount)',
      series_column: 'region',
      series: [
        { name: 'EU', points: [['A', 15], ['B', 25], ['C', 35]] },
        { name: 'US', points: [['A', 101], ['B', 2], ['C', 101]] },
      ],
      truncated: false,
    });
    const barsCsv = await t.request('GET', `/api/dashboards/${id}/cards/${chart}/export?region=US`);
    expect(barsCsv.text).toBe('activity,region,sum(amount)\nA,US,101\nB,US,2\nC,US,101\n');

    // A governed query's metric is not narrowed by the dashboard's filters.
    expect((await data(id, query, '?region=US')).body.data).toEqual({ value: 30, label: 'top' });

    const html = (await data(id, text)).body.data.html as string;
    expect(html).toContain('<h1>Ops</h1>');
    expect(html).toContain('<strong>Bold</strong>');
    expect(html).toContain('href="https://example.test"');
    for (const bad of ['<script', 'javascript:', '<img', 'tracker.example', 'onclick']) expect(html).not.toContain(bad);
    expectProblem(await t.request('GET', `/api/dashboards/${id}/cards/${text}/export`), 422);
  });

  it('computes data as the viewer: row policies and PII masking apply; a viewer cannot change dashboards', async () => {
    const group = await t.request('POST', '/api/groups', { body: { name: 'eu-readers', capabilities: [] } });
    expect((await t.request('POST', `/api/groups/${group.body.id}/members`, { body: { user_id: viewer.id } })).status).toBe(201);
    const policy = await t.request('POST', `/api/datasets/${eventsId}/row-policies`, { body: { group_id: group.body.id, filters: ['region:eq:EU'] } });
    expect(policy.status, policy.text).toBe(201);
    const created = await create({ cards: [processMap, { type: 'table', config: { dataset_id: eventsId, columns: ['case_id', 'email'], sort: [{ column: 'case_id' }], limit: 1 } }] });
    const [map, table] = created.body.cards.map((c: { id: number }) => c.id);

    expect((await data(created.body.id, map)).body.data.cases).toBe(4);
    expect((await data(created.body.id, map, '', viewer.token)).body.data.cases).toBe(2);
    expect((await data(created.body.id, table)).body.data.rows).toEqual([['c1', 'ann@example.test']]);
    const masked = await data(created.body.id, table, '', viewer.token);
    expect(masked.body.data.rows).toEqual([['c1', '***']]);
    const maskedCsv = await t.request('GET', `/api/dashboards/${created.body.id}/cards/${table}/export`, { token: viewer.token });
    expect(maskedCsv.text).toBe('case_id,email\nc1,***\n');

    expectProblem(await create({ cards: [] }, viewer.token), 403);
    expectProblem(await t.request('PATCH', `/api/dashboards/${created.body.id}`, { body: { name: 'x' }, token: viewer.token }), 403);
    expectProblem(await t.request('DELETE', `/api/dashboards/${created.body.id}/cards/${map}`, { token: viewer.token }), 403);
    expect((await t.request('GET', `/api/dashboards/${created.body.id}`, { token: viewer.token })).status).toBe(200);
    await t.request('DELETE', `/api/datasets/${eventsId}/row-policies/${policy.body.id}`);
  });

  it('adds, changes and removes cards one by one; lists, changes and deletes dashboards', async () => {
    const created = await create({ name: 'Crud', description: 'first' });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ name: 'Crud', description: 'first', cards: [], filters: [], project_id: projectId, created_by: expect.any(Number) });
    const id = created.body.id;
    const added = await t.request('POST', `/api/dashboards/${id}/cards`, { body: { type: 'metric', config: { dataset_id: eventsId }, layout: { x: 12, y: 0, w: 12, h: 3 } } });
    expect(added.status, added.text).toBe(201);
    expect(added.body).toMatchObject({ type: 'metric', title: null, layout: { x: 12, y: 0, w: 12, h: 3 } });
    const second = await t.request('POST', `/api/dashboards/${id}/cards`, { body: { type: 'text', title: 'Notes', config: { markdown: 'hi' } } });
    expect(second.body.layout).toEqual({ x: 0, y: 3, w: 12, h: 6 });
    const changed = await t.request('PATCH', `/api/dashboards/${id}/cards/${added.body.id}`, { body: { title: 'Events', type: 'table', config: { dataset_id: eventsId, limit: 2 } } });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body).toMatchObject({ id: added.body.id, type: 'table', title: 'Events', layout: { x: 12, y: 0, w: 12, h: 3 } });
    expect((await data(id, added.body.id)).body.data.rows).toHaveLength(2);
    expect((await t.request('DELETE', `/api/dashboards/${id}/cards/${second.body.id}`)).status).toBe(204);
    expectProblem(await t.request('DELETE', `/api/dashboards/${id}/cards/${second.body.id}`), 404);
    const renamed = await t.request('PATCH', `/api/dashboards/${id}`, { body: { name: 'Crud 2', description: null } });
    expect(renamed.body).toMatchObject({ name: 'Crud 2', description: null, cards: [{ id: added.body.id }] });
    const listed = await t.request('GET', `/api/dashboards?project_id=${projectId}`, { token: viewer.token });
    expect(listed.body.items.map((d: { id: number }) => d.id)).toContain(id);
    // A project holding dashboards is not deleted.
    expectProblem(await t.request('DELETE', `/api/projects/${projectId}`), 409);
    expect((await t.request('DELETE', `/api/dashboards/${id}`)).status).toBe(204);
    expectProblem(await t.request('GET', `/api/dashboards/${id}`), 404);
    expectProblem(await data(id, added.body.id), 404);
  });

  it('refuses bad dashboards and cards with a 400 naming the field, and saves nothing', async () => {
    const before = (await t.request('GET', '/api/dashboards')).body.items.length;
    const cases: [Record<string, unknown>, string][] = [
      [{ cards: [{ type: 'gauge', config: {} }] }, 'body.cards.0.type'],
      [{ cards: [{ type: 'process_map', config: { dataset_id: eventsId, case_column: 'case_id' } }] }, 'body.cards.0.config.activity_column'],
      [{ cards: [{ type: 'process_map', config: { ...processMap.config, extra: 1 } }] }, 'body.cards.0.config.extra'],
      [{ cards: [{ type: 'process_map', config: { ...processMap.config, activity_column: 'nope' } }] }, 'body.cards.0.config.activity_column'],
      [{ cards: [{ type: 'process_map', config: { ...processMap.config, timestamp_column: 'region' } }] }, 'body.cards.0.config.timestamp_column'],
      [{ cards: [{ type: 'process_map', config: { ...processMap.config, min_edge_count: 0 } }] }, 'body.cards.0.config.min_edge_count'],
      [{ cards: [{ type: 'chart', config: { dataset_id: eventsId, chart: 'radar', x: 'activity' } }] }, 'body.cards.0.config.chart'],
      [{ cards: [{ type: 'chart', config: { dataset_id: eventsId, chart: 'bar', x: 'activity', y: 'region', aggregation: 'sum' } }] }, 'body.cards.0.config.y'],
      [{ cards: [{ type: 'chart', config: { dataset_id: eventsId, chart: 'pie', x: 'activity', series: 'region' } }] }, 'body.cards.0.config.series'],
      [{ cards: [{ type: 'metric', config: { dataset_id: eventsId, aggregation: 'avg' } }] }, 'body.cards.0.config.column'],
      [{ cards: [{ type: 'metric', config: {} }] }, 'body.cards.0.config.dataset_id'],
      [{ cards: [{ type: 'table', config: { dataset_id: 999_999 } }] }, 'body.cards.0.config.dataset_id'],
      [{ cards: [{ type: 'table', config: { dataset_id: eventsId, columns: ['case_id" from order_events; drop table x; --'] } }] }, 'body.cards.0.config.columns.0'],
      [{ cards: [{ type: 'table', config: { dataset_id: eventsId, sort: [{ column: "amount' /* */" }] } }] }, 'body.cards.0.config.sort.0.column'],
      [{ cards: [{ type: 'text', config: { markdown: 'x'.repeat(20_001) } }] }, 'body.cards.0.config.markdown'],
      [{ cards: [{ type: 'text', config: { markdown: 'ok' }, layout: { x: 20, y: 0, w: 6, h: 2 } }] }, 'body.cards.0.layout.w'],
      [{ cards: [{ type: 'text', config: { markdown: 'ok' }, layout: { x: -1, y: 0, w: 6, h: 2 } }] }, 'body.cards.0.layout.x'],
      [{ filters: [{ column: 'region' }, { column: 'region' }] }, 'body.filters.1.column'],
      [{ name: '' }, 'body.name'],
      [{ name: 'x'.repeat(201) }, 'body.name'],
      [{ surprise: true }, 'body.surprise'],
    ];
    for (const [body, path] of cases) expectProblem(await create(body), 400, path);
    // Another organization's dataset is not found here; another organization's project is a 422.
    const foreign = await t.request('POST', '/api/projects', { token: other.token, body: { key: 'FOREIGN', name: 'Foreign' } });
    const foreignDataset = await t.request('POST', '/api/datasets', { token: other.token, body: { project_id: foreign.body.id, name: 'foreign_events', columns: [{ name: 'case_id', type: 'string' }] } });
    expectProblem(await create({ cards: [{ type: 'table', config: { dataset_id: foreignDataset.body.id } }] }), 400, 'body.cards.0.config.dataset_id');
    expectProblem(await create({ project_id: foreign.body.id }), 422, 'body.project_id');
    expect((await t.request('GET', '/api/dashboards')).body.items).toHaveLength(before);
  });

  it('refuses filters that are not the dashboard\u2019s or do not fit the column; hostile values are bound, never run', async () => {
    const created = await create({ filters: [{ column: 'region' }, { column: 'amount' }, { column: 'at' }], cards: [{ type: 'metric', config: { dataset_id: eventsId } }] });
    const [card] = created.body.cards;
    const id = created.body.id;
    expectProblem(await data(id, card.id, '?country=FR'), 400, 'query.country');
    expectProblem(await data(id, card.id, '?amount=ten'), 400, 'query.amount');
    expectProblem(await data(id, card.id, '?at=yesterday'), 400, 'query.at');
    expectProblem(await data(id, card.id, `?region=${'x'.repeat(1001)}`), 400, 'query.region');
    expectProblem(await data(id, card.id, `?region=a%00b`), 400, 'query.region');
    expectProblem(await data(id, card.id, `?${Array.from({ length: 101 }, (_, i) => `region=r${i}`).join('&')}`), 400, 'query.region');
    for (const hostile of ["EU' or '1'='1", 'EU" or "1"="1', "EU'; drop table order_events; --", 'EU /* */ or 1=1', "EU') union select 1 --", '(a+)+$'.repeat(10)]) {
      const res = await data(id, card.id, `?region=${encodeURIComponent(hostile)}`);
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.value).toBe(0);
    }
    expect((await data(id, card.id, '?amount=100&amount=1')).body.data.value).toBe(6);
    expect((await data(id, card.id, `?at=${encodeURIComponent(at(0))}`)).body.data.value).toBe(4);
    // An empty value is null: no event has a null region.
    expect((await data(id, card.id, '?region=')).body.data.value).toBe(0);
    // The dataset is still whole.
    expect((await t.request('GET', `/api/datasets/${eventsId}`)).body.row_count).toBe(EVENTS.length);
  });

  it('answers 409 for a card whose dataset was deleted since', async () => {
    const scratch = await t.request('POST', '/api/datasets', { body: { project_id: projectId, name: 'scratch_events', columns: [{ name: 'n', type: 'integer' }] } });
    const created = await create({ cards: [{ type: 'metric', config: { dataset_id: scratch.body.id, aggregation: 'sum', column: 'n' } }] });
    expect(created.status, created.text).toBe(201);
    expect((await data(created.body.id, created.body.cards[0].id)).body.data.value).toBeNull();
    expect((await t.request('DELETE', `/api/datasets/${scratch.body.id}`)).status).toBe(204);
    expectProblem(await data(created.body.id, created.body.cards[0].id), 409);
  });

  describe('published pages', () => {
    let dashboardId: number;
    const publish = (body: Record<string, unknown> = {}, id = dashboardId) => t.request('POST', `/api/dashboards/${id}/publish`, { body });
    const page = (token: string, query = '') => t.request('GET', `/p/dashboards/${token}${query}`, { token: null });

    beforeAll(async () => {
      expect((await t.request('PUT', '/api/branding', { body: { display_name: 'Acme <Ops>', primary_color: '#123456', accent_color: '#abcdef' } })).status).toBe(200);
      const created = await create({
        name: 'Public ops',
        filters: [{ column: 'region' }],
        cards: [processMap, { type: 'table', title: 'Who', config: { dataset_id: eventsId, columns: ['case_id', 'email'], sort: [{ column: 'case_id' }], limit: 2 } }],
      });
      dashboardId = created.body.id;
    });

    it('publishes a signed link whose page shows the data as the publisher sees it, PII masked, branded, under a strict CSP', async () => {
      const before = Date.now();
      const link = await publish();
      expect(link.status, link.text).toBe(201);
      expect(link.body).toMatchObject({ id: expect.any(Number), dashboard_id: dashboardId, state: 'active', revoked_at: null, url: `/p/dashboards/${link.body.token}` });
      expect(Date.parse(link.body.expires_at) - before).toBeGreaterThan(29 * 86_400_000);
      expect(link.body.token).toMatch(/^\d+\.[A-Za-z0-9_-]{22}\.[0-9a-f]{64}$/);

      const res = await page(link.body.token);
      expect(res.status, res.text).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      const csp = res.headers.get('content-security-policy')!;
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.text).toContain('Acme &lt;Ops&gt;');
      expect(res.text).not.toContain('Acme <Ops>');
      // The admin who published holds datasets.pii.read; the page masks PII all the same.
      expect(res.text).toContain('***');
      expect(res.text).not.toContain('ann@example.test');
      const json = JSON.parse(/<script type="application\/json" id="dashboard-data">(.*?)<\/script>/s.exec(res.text)![1]);
      expect(json.colors).toEqual({ primary: '#123456', accent: '#abcdef' });
      expect(json.cards.map((c: { type: string }) => c.type)).toEqual(['process_map', 'table']);
      expect(json.cards[0].data.cases).toBe(4);
      expect(json.cards[1].data.rows).toEqual([['c1', '***'], ['c1', '***']]);
      // Every script is a file of this server.
      expect([...res.text.matchAll(/<script([^>]*)>/g)].map((m) => m[1])).toEqual([' type="application/json" id="dashboard-data"', expect.stringMatching(/^ src="assets\/[0-9a-f]{16}\/echarts\.min\.js"$/), expect.stringMatching(/^ src="assets\/[0-9a-f]{16}\/page\.js"$/)]);
      // The dashboard's filters work in the page's query string.
      const eu = await page(link.body.token, '?region=EU');
      expect(JSON.parse(/id="dashboard-data">(.*?)<\/script>/s.exec(eu.text)![1]).cards[0].data.cases).toBe(2);
      expectProblem(await page(link.body.token, '?nope=1'), 400, 'query.nope');

      // Listed with its state, never its token; in the publishing registry; the event published.
      const listed = await t.request('GET', `/api/dashboards/${dashboardId}/publish`);
      expect(listed.body.items.find((l: { id: number }) => l.id === link.body.id)).toMatchObject({ state: 'active' });
      expect(listed.text).not.toContain(link.body.token);
      const assets = await t.request('GET', '/api/publishing/assets?asset_type=dashboard');
      expect(assets.body.items).toEqual([expect.objectContaining({ asset_type: 'dashboard', id: dashboardId, name: 'Public ops', status: 'published', url: `/api/dashboards/${dashboardId}/publish` })]);
      const events = await t.kernel.storage.db.selectFrom('event_outbox').select(['type', 'payload']).where('type', '=', 'dashboard.published').execute();
      expect(events.map((e) => t.kernel.storage.decodeJson<{ link_id: number }>(e.payload).link_id)).toContain(link.body.id);
    });

    it('shows the dashboard as it was published, reads as the publisher in their organization, and never logs a token', async () => {
      const link = await publish();
      const before = JSON.parse(/id="dashboard-data">(.*?)<\/script>/s.exec((await page(link.body.token)).text)![1]);
      // Cards added or changed since do not reach the link (an editor cannot read through the publisher's rights).
      const editor = await t.userToken('editor');
      const added = await t.request('POST', `/api/dashboards/${dashboardId}/cards`, { token: editor.token, body: { type: 'metric', config: { query: { sql: 'select count(*) from order_events' } } } });
      expect(added.status, added.text).toBe(201);
      const after = JSON.parse(/id="dashboard-data">(.*?)<\/script>/s.exec((await page(link.body.token)).text)![1]);
      expect(after.cards.map((c: { id: number }) => c.id)).toEqual(before.cards.map((c: { id: number }) => c.id));
      await t.request('DELETE', `/api/dashboards/${dashboardId}/cards/${added.body.id}`);
      // Its reads are the publisher's, audited in the organization.
      const audit = await t.request('GET', '/api/audit?action=sql.execute&limit=5');
      expect(audit.body.items[0]).toMatchObject({ org_id: 1, actor_kind: 'user', actor_username: 'admin' });
      // The request log names the route, never the path holding the token.
      await t.request('GET', `/p/dashboards/${link.body.token}/logo`, { token: null });
      expect(logLines.some((line) => line.includes('/p/dashboards/{token}'))).toBe(true);
      expect(logLines.filter((line) => line.includes(link.body.token))).toEqual([]);
    });

    it('a token without datasets.read may not publish: a link lends the right to read', async () => {
      const scoped = await t.request('POST', '/api/auth/tokens', { body: { name: 'boards only', scopes: ['dashboards.read', 'dashboards.write'] } });
      expect(scoped.status, scoped.text).toBe(201);
      expectProblem(await t.request('POST', `/api/dashboards/${dashboardId}/publish`, { token: scoped.body.token, body: {} }), 403);
    });

    it('serves the page\u2019s assets and the organization\u2019s logo from this server', async () => {
      const link = await publish();
      const html = (await page(link.body.token)).text;
      const url = (name: string) => `/p/dashboards/${new RegExp(`assets/[0-9a-f]{16}/${name.replace('.', '\\.')}`).exec(html)![0]}`;
      const echarts = await t.request('GET', url('echarts.min.js'), { token: null });
      expect(echarts.status).toBe(200);
      expect(echarts.headers.get('content-type')).toMatch(/^text\/javascript/);
      expect(echarts.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      expect(echarts.text.length).toBeGreaterThan(500_000);
      expect((await t.request('GET', url('page.css'), { token: null })).headers.get('content-type')).toMatch(/^text\/css/);
      const version = url('page.css').split('/')[4];
      for (const bad of [`${version}/nope.js`, `0000000000000000/page.css`, `${version}/..%2F..%2Fpackage.json`, `${version}/%2Fetc%2Fpasswd`, `${version}/constructor`, `${version}/__proto__`]) {
        expectProblem(await t.request('GET', `/p/dashboards/assets/${bad}`, { token: null }), 404);
      }
      expectProblem(await t.request('GET', `/p/dashboards/${link.body.token}/logo`, { token: null }), 404);
      const svg = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><rect width="10" height="10" fill="#123456"/></svg>';
      expect((await t.request('PUT', '/api/branding/logo', { body: svg, headers: { 'content-type': 'image/svg+xml' } })).status).toBe(200);
      const logo = await t.request('GET', `/p/dashboards/${link.body.token}/logo`, { token: null });
      expect(logo.status).toBe(200);
      expect(logo.headers.get('content-type')).toBe('image/svg+xml');
      expect((await page(link.body.token)).text).toContain(`<img class="logo" src="${link.body.token}/logo"`);
      expect((await t.request('DELETE', '/api/branding/logo')).status).toBe(204);
    });

    it('a revoked, expired, forged or altered link answers 404, as does one whose publisher may no longer read it', async () => {
      const [one, two, three] = [(await publish()).body, (await publish()).body, (await publish()).body];
      expect((await t.request('DELETE', `/api/dashboards/${dashboardId}/publish/${one.id}`)).status).toBe(204);
      expectProblem(await page(one.token), 404);
      expectProblem(await t.request('DELETE', `/api/dashboards/${dashboardId}/publish/${one.id}`), 404);
      expect((await page(two.token)).status).toBe(200);

      // Expired: its time is up.
      await t.kernel.storage.db.updateTable('dashboards_links').set({ expires_at: new Date(Date.now() - 1000).toISOString() }).where('id', '=', two.id).execute();
      expectProblem(await page(two.token), 404);
      expect((await t.request('GET', `/api/dashboards/${dashboardId}/publish`)).body.items.find((l: { id: number }) => l.id === two.id).state).toBe('expired');

      // Forged and altered tokens.
      const [id, nonce, signature] = three.token.split('.');
      const flipped = signature.slice(0, -1) + (signature.endsWith('0') ? '1' : '0');
      for (const forged of [`${id}.${nonce}.${flipped}`, `${Number(id) + 1}.${nonce}.${signature}`, `${id}.${'A'.repeat(22)}.${signature}`, 'x', `${three.token}x`, encodeURIComponent("1' or '1'='1"), '0.' + 'A'.repeat(22) + '.' + '0'.repeat(64)]) {
        expectProblem(await page(forged), 404);
      }
      expect((await page(three.token)).status).toBe(200);

      // Turned off for the organization: not found there.
      expect((await t.request('PUT', '/api/plugins/dashboards/organizations/1', { body: { enabled: false } })).status).toBe(200);
      try {
        expectProblem(await page(three.token), 404);
        expectProblem(await t.request('GET', `/p/dashboards/${three.token}/logo`, { token: null }), 404);
      } finally {
        expect((await t.request('PUT', '/api/plugins/dashboards/organizations/1', { body: { enabled: true } })).status).toBe(200);
      }

      // Unpublish: every live link is revoked.
      expect((await t.request('DELETE', `/api/dashboards/${dashboardId}/publish`)).status).toBe(204);
      expectProblem(await page(three.token), 404);
      expect((await t.request('GET', '/api/publishing/assets?asset_type=dashboard')).body.items).toEqual([]);
    });

    it('a link of a publisher who was deactivated answers 404', async () => {
      const editor = await t.userToken('editor');
      const created = await t.request('POST', '/api/dashboards', { token: editor.token, body: { project_id: projectId, name: 'Editor board', cards: [processMap] } });
      expect(created.status, created.text).toBe(201);
      const link = await t.request('POST', `/api/dashboards/${created.body.id}/publish`, { token: editor.token, body: {} });
      expect(link.status, link.text).toBe(201);
      expect((await page(link.body.token)).status).toBe(200);
      expect((await t.request('PATCH', `/api/users/${editor.id}`, { body: { is_active: false } })).status).toBe(200);
      expectProblem(await page(link.body.token), 404);
    });

    it('refuses a bad expiry with a 400 naming it, and a viewer may not publish', async () => {
      for (const expires_at of [new Date(Date.now() - 60_000).toISOString(), new Date(Date.now() + 366 * 86_400_000).toISOString(), 'tomorrow', '2026-13-01T00:00:00Z', 42]) {
        expectProblem(await publish({ expires_at }), 400, 'body.expires_at');
      }
      expectProblem(await publish({ surprise: 1 }), 400);
      const viewerLink = await t.request('POST', `/api/dashboards/${dashboardId}/publish`, { token: viewer.token, body: {} });
      expectProblem(viewerLink, 403);
      const inTwoDays = new Date(Date.now() + 2 * 86_400_000).toISOString();
      const link = await publish({ expires_at: inTwoDays });
      expect(link.status, link.text).toBe(201);
      expect(link.body.expires_at).toBe(inTwoDays);
    });
  });
});
