import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, until, type TestKernel } from '../harness/index.ts';
import { createReadmeOrders } from '../harness/readme-orders.ts';
import { finished } from '../pipeline/pipeline-helpers.ts';

const STEPS = 'order_id,step,at,region\no1,received,2026-11-02T09:00:00Z,EU\no1,checked,2026-11-02T09:10:00Z,EU\no1,shipped,2026-11-02T09:40:00Z,EU\no2,received,2026-11-02T09:05:00Z,US\no2,checked,2026-11-02T09:25:00Z,US\no2,rejected,2026-11-02T09:30:00Z,US\n';
const SECRET = 'a-long-random-secret-of-yours';

/** The README's dashboards, webhooks and notifications walkthroughs, with the same requests and the ids they name. */
describe.each(DIALECTS)("the README's dashboards, webhooks and notifications walkthrough (%s)", (dialect) => {
  let t: TestKernel;
  let receiver: http.Server;
  let target: string;
  const received: { headers: http.IncomingHttpHeaders; body: string }[] = [];
  const post = (path: string, body?: unknown) => t.request('POST', path, body === undefined ? {} : { body });
  const csv = (path: string, text: string) => t.request('POST', path, { body: text, headers: { 'content-type': 'text/csv' } });

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        received.push({ headers: req.headers, body });
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    target = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/platform`;
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1', WEBHOOK_RETRY_BASE_MS: '100' } });
    await createReadmeOrders(t);
  });
  afterAll(async () => {
    await t?.stop();
    await new Promise((resolve) => receiver?.close(resolve));
  });

  it('builds a dashboard with a process map, publishes it as a link, gets a run failure by webhook, and reads the inbox', async () => {
    const steps = await post('/api/datasets', { project_id: 1, name: 'order_steps', columns: [{ name: 'order_id', type: 'string' }, { name: 'step', type: 'string' }, { name: 'at', type: 'timestamp' }, { name: 'region', type: 'string' }] });
    expect(steps.body.id).toBe(2);
    expect((await csv('/api/datasets/2/data', STEPS)).status).toBe(200);
    expect((await t.request('GET', '/api/dashboards/card-types')).body.items.map((c: { type: string }) => c.type)).toContain('process_map');
    const dashboard = await post('/api/dashboards', {
      project_id: 1,
      name: 'Fulfilment',
      filters: [{ column: 'region', label: 'Region' }],
      cards: [
        { type: 'process_map', title: 'Order flow', layout: { x: 0, y: 0, w: 16, h: 8 }, config: { dataset_id: 2, case_column: 'order_id', activity_column: 'step', timestamp_column: 'at' } },
        { type: 'metric', title: 'Orders', layout: { x: 16, y: 0, w: 8, h: 3 }, config: { dataset_id: 2, aggregation: 'count_distinct', column: 'order_id' } },
        { type: 'chart', title: 'Steps', layout: { x: 16, y: 3, w: 8, h: 5 }, config: { dataset_id: 2, chart: 'bar', x: 'step' } },
      ],
    });
    expect(dashboard.status, dashboard.text).toBe(201);
    expect(dashboard.body.id).toBe(1);
    expect(dashboard.body.cards.map((c: { id: number }) => c.id)).toEqual([1, 2, 3]);
    const map = await t.request('GET', '/api/dashboards/1/cards/1/data');
    expect(map.body.data).toMatchObject({ cases: 2, start_activities: [{ activity: 'received', count: 2 }], edges: expect.arrayContaining([{ from: 'received', to: 'checked', count: 2, mean_duration_s: 900, median_duration_s: 900 }]) });
    expect((await t.request('GET', '/api/dashboards/1/cards/1/data?region=EU')).body.data.cases).toBe(1);
    expect((await t.request('GET', '/api/dashboards/1/cards/1/export')).text).toMatch(/^from,to,count,mean_duration_s,median_duration_s\n/);
    const text = await post('/api/dashboards/1/cards', { type: 'text', config: { markdown: '**Rejected** orders stop after the check.' } });
    expect(text.body.id).toBe(4);
    expect((await t.request('PATCH', '/api/dashboards/1/cards/4', { body: { layout: { x: 0, y: 8, w: 24, h: 2 } } })).status).toBe(200);

    const link = await post('/api/dashboards/1/publish', { expires_at: '2027-01-31T00:00:00Z' });
    expect(link.status, link.text).toBe(201);
    expect(link.body).toMatchObject({ id: 1, state: 'active', url: `/p/dashboards/${link.body.token}` });
    const page = await t.request('GET', `/p/dashboards/${link.body.token}?region=EU`, { token: null });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect((await t.request('GET', '/api/dashboards/1/publish')).body.items).toHaveLength(1);

    expect((await t.request('GET', '/api/webhooks/event-types')).status).toBe(200);
    const hook = await post('/api/webhooks', { event_type: 'recipe.run.failed', target_url: target, secret: SECRET, description: 'failures to on-call' });
    expect(hook.status, hook.text).toBe(201);
    expect(hook.body.id).toBe(1);
    expect((await post('/api/webhooks/1/ping')).body).toMatchObject({ id: 1, status: 'succeeded' });
    expect((await post('/api/datasets', { project_id: 1, name: 'raw_numbers', columns: [{ name: 'n', type: 'integer' }] })).body.id).toBe(3);
    expect((await csv('/api/datasets/3/data', 'n\n1\n')).status).toBe(200);
    expect((await post('/api/datasets', { project_id: 1, name: 'numbers_out', columns: [] })).body.id).toBe(4);
    const recipe = await post('/api/pipeline/recipes', { project_id: 1, name: 'copy numbers', type: 'sql', inputs: [3], outputs: [4], params: { query: 'select n from raw_numbers' } });
    expect(recipe.status, recipe.text).toBe(201);
    expect(recipe.body.id).toBe(1);
    expect((await csv('/api/datasets/3/data?mode=replace', 'm\n1\n')).status).toBe(200);
    const run = await post('/api/pipeline/recipes/1/run');
    expect(run.status, run.text).toBe(202);
    expect(await finished(t, run.body.run.id)).toMatchObject({ status: 'failed' });
    const log = await until(() => t.request('GET', '/api/webhooks/1/deliveries'), (r) => r.body.items.length === 2 && r.body.items[0].status === 'succeeded', 20_000);
    expect(log.body.items.map((d: { id: number; event_type: string }) => [d.id, d.event_type])).toEqual([[2, 'recipe.run.failed'], [1, 'ping']]);
    const delivered = received.find((r) => r.headers['x-service-delivery'] === '2')!;
    expect(delivered.headers['x-service-signature']).toBe(`sha256=${crypto.createHmac('sha256', SECRET).update(delivered.body).digest('hex')}`);
    expect(JSON.parse(delivered.body)).toMatchObject({ type: 'recipe.run.failed', org_id: 1, data: { run_id: run.body.run.id, kind: 'recipe', status: 'failed', recipe_id: 1 } });
    expect((await post('/api/webhooks/1/deliveries/2/redeliver')).status).toBe(202);

    // The admin created the dashboard and started the run: both are in the inbox.
    const inbox = await until(() => t.request('GET', '/api/notifications?unread=true'), (r) => r.body.items.length === 2, 20_000);
    expect(inbox.body.items.map((i: { type: string }) => i.type).sort()).toEqual(['dashboard.published', 'run.failed']);
    expect((await t.request('GET', '/api/notifications/unread-count')).body).toEqual({ count: 2 });
    expect((await post('/api/notifications/1/read')).body.read_at).toEqual(expect.any(String));
    expect((await post('/api/notifications/read-all')).body).toEqual({ updated: 1 });
    expect((await t.request('DELETE', '/api/notifications/1')).status).toBe(204);
    expect((await t.request('GET', '/api/notifications/preferences')).body.items).toHaveLength(9);
    expect((await t.request('PUT', '/api/notifications/preferences', { body: { items: [{ type: 'run.failed', in_app: true, email: true }] } })).status).toBe(200);

    expect((await t.request('DELETE', '/api/dashboards/1/publish/1')).status).toBe(204);
    expect((await t.request('DELETE', '/api/dashboards/1/publish')).status).toBe(204);
    expect((await t.request('GET', `/p/dashboards/${link.body.token}`, { token: null })).status).toBe(404);
  });
});
