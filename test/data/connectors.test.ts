import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

/** A real HTTP peer on loopback: records what it receives and answers what the test tells it. */
async function startPeer() {
  const received: Received[] = [];
  let answer = { status: 200, body: { ok: true } as unknown };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body: text ? JSON.parse(text) : null });
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    answer: (status: number, body: unknown) => (answer = { status, body }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe.each(DIALECTS)('connectors (%s)', (dialect) => {
  let t: TestKernel;
  let strict: TestKernel;
  let peer: Awaited<ReturnType<typeof startPeer>>;
  let viewer: string;
  const logs: string[] = [];
  const SECRET = 'hook-secret-3f9a1c';
  const TOKEN = 'provider-token-77aa91';

  beforeAll(async () => {
    peer = await startPeer();
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1' }, logLines: logs });
    strict = await startTestKernel({ dialect });
    viewer = (await t.userToken('viewer')).token;
  });
  afterAll(async () => {
    await t?.stop();
    await strict?.stop();
    await peer?.close();
  });

  const createWebhook = (kernel = t, name = `hook-${Math.random().toString(36).slice(2, 8)}`) =>
    kernel.request('POST', '/api/connectors', { body: { name, type: 'workflow_webhook', config: { webhook_url: `${peer.url}/hook/${SECRET}` } } });

  it('lists the connector types the loaded plugins contribute, with their schemas', async () => {
    const res = await t.request('GET', '/api/connectors/types');
    expect(res.status).toBe(200);
    const byType = Object.fromEntries(res.body.map((x: { type: string }) => [x.type, x]));
    expect(byType.workflow_webhook).toMatchObject({ plugin_id: 'workflow_webhook', secret_fields: ['webhook_url'], actions: [{ name: 'send_message' }] });
    expect(byType.workflow_webhook.config_schema.properties.webhook_url).toBeDefined();
    expect(byType.messaging_provider.secret_fields).toEqual(['token']);
  });

  it('keeps secrets encrypted at rest and out of answers, the audit log and the logs', async () => {
    const created = await createWebhook();
    expect(created.status).toBe(201);
    expect(created.body.config).toEqual({ webhook_url: '********' });
    const stored = await t.kernel.storage.db.selectFrom('connectors').select('config').where('id', '=', created.body.id).executeTakeFirstOrThrow();
    expect(JSON.stringify(stored)).not.toContain(SECRET);
    expect(JSON.stringify(stored)).toContain('vault:v1:');
    expect((await t.request('GET', `/api/connectors/${created.body.id}`)).body.config.webhook_url).toBe('********');
    expect(JSON.stringify((await t.request('GET', '/api/connectors')).body)).not.toContain(SECRET);
    expect(JSON.stringify((await t.request('GET', '/api/audit?target=connector:' + created.body.id)).body)).not.toContain(SECRET);
    expect(logs.join('\n')).not.toContain(SECRET);
  });

  it('refuses unknown types and invalid configs naming the field, creating nothing', async () => {
    const before = (await t.request('GET', '/api/connectors')).body.length;
    const cases: [Record<string, unknown>, string][] = [
      [{ name: 'x', type: 'carrier_pigeon', config: {} }, 'body.type'],
      [{ name: 'x', type: 'workflow_webhook', config: { webhook_url: 'not a url' } }, 'body.config.webhook_url'],
      [{ name: 'x', type: 'workflow_webhook', config: { webhook_url: 'ftp://example.test/x' } }, 'body.config.webhook_url'],
      [{ name: 'x', type: 'workflow_webhook', config: {} }, 'body.config.webhook_url'],
      [{ name: 'x', type: 'messaging_provider', config: { base_url: peer.url, sender: 'shop' } }, 'body.config.token'],
    ];
    for (const [body, path] of cases) {
      const res = await t.request('POST', '/api/connectors', { body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.errors[0].path, JSON.stringify(body)).toBe(path);
    }
    expect((await t.request('POST', '/api/connectors', { body: { name: 'x', type: 'workflow_webhook', config: { webhook_url: `${peer.url}/a`, extra: 1 } } })).status).toBe(400);
    expect((await t.request('GET', '/api/connectors')).body.length).toBe(before);
  });

  it('sends {message, metadata} to the workflow and returns its answer', async () => {
    const hook = (await createWebhook()).body;
    peer.answer(200, { accepted: true, id: 'run-1' });
    const count = peer.received.length;
    const res = await t.request('POST', `/api/connectors/${hook.id}/actions/send_message`, { body: { message: 'hello', metadata: { order: 7 } } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ result: { accepted: true, id: 'run-1' } });
    expect(peer.received.slice(count)).toMatchObject([{ method: 'POST', url: `/hook/${SECRET}`, body: { message: 'hello', metadata: { order: 7 } } }]);
    expect((await t.request('POST', `/api/connectors/${hook.id}/actions/send_message`, { body: { metadata: {} } })).body.errors[0].path).toBe('body.message');
    expect((await t.request('POST', `/api/connectors/${hook.id}/actions/launch_rocket`, { body: {} })).status).toBe(404);
  });

  it('answers the receiver\u2019s status when the call fails, without retrying', async () => {
    const hook = (await createWebhook()).body;
    peer.answer(503, { error: 'busy' });
    const count = peer.received.length;
    const res = await t.request('POST', `/api/connectors/${hook.id}/actions/send_message`, { body: { message: 'hello' } });
    expect(res.status).toBe(503);
    expect(res.body.detail).toMatch(/answered 503/);
    expect(peer.received.length - count).toBe(1);
    peer.answer(200, { ok: true });
  });

  it('refuses private and loopback targets unless OUTBOUND_ALLOWED_HOSTS lists them', async () => {
    const hook = (await createWebhook(strict)).body;
    const count = peer.received.length;
    const res = await strict.request('POST', `/api/connectors/${hook.id}/actions/send_message`, { body: { message: 'hello' } });
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/private, loopback or link-local/);
    expect(peer.received.length).toBe(count);
    const byName = await strict.request('POST', '/api/connectors', { body: { name: 'by-name', type: 'workflow_webhook', config: { webhook_url: `${peer.url.replace('127.0.0.1', 'localhost')}/x` } } });
    expect((await strict.request('POST', `/api/connectors/${byName.body.id}/actions/send_message`, { body: { message: 'hello' } })).status).toBe(422);
    const metadata = await strict.request('POST', '/api/connectors', { body: { name: 'metadata', type: 'workflow_webhook', config: { webhook_url: 'http://169.254.169.254/latest/meta-data' } } });
    expect((await strict.request('POST', `/api/connectors/${metadata.body.id}/actions/send_message`, { body: { message: 'hello' } })).status).toBe(422);
  });

  it('sends messages through a messaging provider with its token, and tests it', async () => {
    const created = await t.request('POST', '/api/connectors', { body: { name: 'whatsapp', type: 'messaging_provider', config: { base_url: peer.url, sender: '+33600000000', token: TOKEN } } });
    expect(created.status).toBe(201);
    expect(created.body.config).toEqual({ base_url: peer.url, sender: '+33600000000', token: '********' });
    peer.answer(202, { message_id: 'm-1' });
    const count = peer.received.length;
    const sent = await t.request('POST', `/api/connectors/${created.body.id}/actions/send_message`, { body: { recipient: '+33612345678', text: 'Your order shipped' } });
    expect(sent.status).toBe(200);
    expect(sent.body.result).toEqual({ message_id: 'm-1' });
    const call = peer.received[count];
    expect(call).toMatchObject({ method: 'POST', url: '/messages', body: { from: '+33600000000', to: '+33612345678', text: 'Your order shipped' } });
    expect(call.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect((await t.request('POST', `/api/connectors/${created.body.id}/actions/send_message`, { body: { recipient: '0612', text: 'x' } })).body.errors[0].path).toBe('body.recipient');
    peer.answer(200, { ok: true });
    expect((await t.request('POST', `/api/connectors/${created.body.id}/test`)).body).toEqual({ ok: true, message: 'the provider answered 200' });
    // A secret sent back as the mask keeps its value; the other fields change.
    const patched = await t.request('PATCH', `/api/connectors/${created.body.id}`, { body: { config: { base_url: peer.url, sender: 'shop', token: '********' } } });
    expect(patched.body.config).toEqual({ base_url: peer.url, sender: 'shop', token: '********' });
    await t.request('POST', `/api/connectors/${created.body.id}/actions/send_message`, { body: { recipient: '+33612345678', text: 'again' } });
    expect(peer.received.at(-1)!.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(logs.join('\n')).not.toContain(TOKEN);
  });

  it('lets viewers see connectors but not change or use them', async () => {
    const hook = (await createWebhook()).body;
    expect((await t.request('GET', `/api/connectors/${hook.id}`, { token: viewer })).status).toBe(200);
    expect((await t.request('POST', '/api/connectors', { token: viewer, body: { name: 'v', type: 'workflow_webhook', config: { webhook_url: `${peer.url}/v` } } })).status).toBe(403);
    expect((await t.request('POST', `/api/connectors/${hook.id}/actions/send_message`, { token: viewer, body: { message: 'x' } })).status).toBe(403);
    expect((await t.request('DELETE', `/api/connectors/${hook.id}`, { token: viewer })).status).toBe(403);
    expect((await t.request('DELETE', `/api/connectors/${hook.id}`)).status).toBe(204);
    expect((await t.request('GET', `/api/connectors/${hook.id}`)).status).toBe(404);
  });

  it('keeps connectors inside their organization', async () => {
    const hook = (await createWebhook()).body;
    const { token } = await t.outsider('conn-outsider');
    expect((await t.request('GET', '/api/connectors', { token })).body).toEqual([]);
    for (const [method, path, body] of [
      ['GET', `/api/connectors/${hook.id}`, undefined],
      ['PATCH', `/api/connectors/${hook.id}`, { name: 'hijack' }],
      ['DELETE', `/api/connectors/${hook.id}`, undefined],
      ['POST', `/api/connectors/${hook.id}/test`, undefined],
      ['POST', `/api/connectors/${hook.id}/actions/send_message`, { message: 'x' }],
    ] as const) {
      expect((await t.request(method, path, { token, body })).status, `${method} ${path}`).toBe(404);
      expect((await t.request(method, path, { token, body, headers: { 'x-org-id': '1' } })).status, `${method} ${path}`).toBe(403);
    }
  });
});
