import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, writeManifest, type TestKernel, type TestResponse } from '../harness/index.ts';

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

/** A peer on loopback that accepts connections and never answers a byte. */
async function startSilentPeer() {
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
    socket.resume(); // read the request, answer nothing
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    connections: () => connections,
    open: () => sockets.size,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A loopback port nothing listens on (taken, then released). */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe.each(DIALECTS)('connectors (%s)', (dialect) => {
  let t: TestKernel;
  let strict: TestKernel;
  /** Allows loopback through a CIDR range only. */
  let ranged: TestKernel;
  /** Allows 127.0.0.1 and gives up on a peer after 300 ms. */
  let hasty: TestKernel;
  let peer: Awaited<ReturnType<typeof startPeer>>;
  let viewer: string;
  const logs: string[] = [];
  const SECRET = 'hook-secret-3f9a1c';
  const TOKEN = 'provider-token-77aa91';
  const TIMEOUT_MS = 300;

  beforeAll(async () => {
    peer = await startPeer();
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1' }, logLines: logs });
    strict = await startTestKernel({ dialect });
    ranged = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '10.1.0.0/16,127.0.0.0/8' } });
    hasty = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1', OUTBOUND_TIMEOUT_MS: String(TIMEOUT_MS) } });
    viewer = (await t.userToken('viewer')).token;
  });
  afterAll(async () => {
    await t?.stop();
    await strict?.stop();
    await ranged?.stop();
    await hasty?.stop();
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

  it('lets a CIDR range in OUTBOUND_ALLOWED_HOSTS reach a loopback receiver, and only what the range covers', async () => {
    const hook = await createWebhook(ranged);
    expect(hook.status).toBe(201);
    peer.answer(200, { via: 'range' });
    const count = peer.received.length;
    const res = await ranged.request('POST', `/api/connectors/${hook.body.id}/actions/send_message`, { body: { message: 'through the range' } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ result: { via: 'range' } });
    expect(peer.received.slice(count)).toMatchObject([{ method: 'POST', url: `/hook/${SECRET}`, body: { message: 'through the range' } }]);
    peer.answer(200, { ok: true });

    // The same receiver from a kernel without the setting: refused, and the receiver hears nothing.
    const same = await createWebhook(strict);
    const refused = await strict.request('POST', `/api/connectors/${same.body.id}/actions/send_message`, { body: { message: 'through the range' } });
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toMatch(/private, loopback or link-local/);
    expect(peer.received.length).toBe(count + 1);

    // The ranges allow what they cover, nothing more: other private ranges, the metadata address and IPv6 loopback stay refused.
    for (const url of ['http://10.2.0.1/x', 'http://192.168.1.1/x', 'http://169.254.169.254/latest/meta-data', `http://[::1]:${new URL(peer.url).port}/x`]) {
      const created = await ranged.request('POST', '/api/connectors', { body: { name: `outside-${url}`, type: 'workflow_webhook', config: { webhook_url: url } } });
      expect(created.status, url).toBe(201);
      const res = await ranged.request('POST', `/api/connectors/${created.body.id}/actions/send_message`, { body: { message: 'x' } });
      expect(res.status, url).toBe(422);
      expect(res.body.detail, url).toMatch(/private, loopback or link-local/);
    }
    expect(peer.received.length).toBe(count + 1);
  });

  it('answers an unreachable peer with a 502 problem naming its host', async () => {
    const port = await freePort();
    const hook = await t.request('POST', '/api/connectors', { body: { name: 'nobody-home', type: 'workflow_webhook', config: { webhook_url: `http://127.0.0.1:${port}/hook/${SECRET}` } } });
    expect(hook.status).toBe(201);
    const res = await t.request('POST', `/api/connectors/${hook.body.id}/actions/send_message`, { body: { message: 'hello' } });
    expect(res.status, JSON.stringify(res.body)).toBe(502);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ status: 502 });
    expect(res.body.detail).toContain(`127.0.0.1:${port}`);
    expect(res.body.detail).toMatch(/could not be reached/);
    expect(res.text).not.toContain(SECRET);
    // The same peer behind a messaging provider: the action is a 502 too, its test a failed outcome naming the host.
    const provider = await t.request('POST', '/api/connectors', { body: { name: 'nobody-home-sms', type: 'messaging_provider', config: { base_url: `http://127.0.0.1:${port}`, sender: 'shop', token: TOKEN } } });
    const sent = await t.request('POST', `/api/connectors/${provider.body.id}/actions/send_message`, { body: { recipient: '+33612345678', text: 'hi' } });
    expect(sent.status).toBe(502);
    expect(sent.body.detail).toContain(`127.0.0.1:${port}`);
    const tested = await t.request('POST', `/api/connectors/${provider.body.id}/test`);
    expect(tested.status).toBe(200);
    expect(tested.body.ok).toBe(false);
    expect(tested.body.message).toContain(`127.0.0.1:${port}`);
  });

  it('cuts off a peer that never answers after OUTBOUND_TIMEOUT_MS with a 502, and keeps serving meanwhile', async () => {
    const silent = await startSilentPeer();
    try {
      const hook = await hasty.request('POST', '/api/connectors', { body: { name: 'silent', type: 'workflow_webhook', config: { webhook_url: `${silent.url}/hook/${SECRET}` } } });
      expect(hook.status).toBe(201);
      const started = Date.now();
      const pending = hasty.request('POST', `/api/connectors/${hook.body.id}/actions/send_message`, { body: { message: 'anyone?' } });
      // While the call hangs, the server answers other requests.
      await vi.waitFor(() => expect(silent.connections()).toBe(1));
      const meanwhile = await hasty.request('GET', `/api/connectors/${hook.body.id}`);
      expect(meanwhile.status).toBe(200);
      const res = await pending;
      const elapsed = Date.now() - started;
      expect(res.status, JSON.stringify(res.body)).toBe(502);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(res.body.detail).toBe(`${new URL(silent.url).host} did not answer within ${TIMEOUT_MS} ms`);
      expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      expect(elapsed).toBeLessThan(10_000); // the default limit, had the setting been ignored
      // No retry, and the abandoned connection is closed rather than left open.
      expect(silent.connections()).toBe(1);
      await vi.waitFor(() => expect(silent.open()).toBe(0));
      // A provider's test against it is a failed outcome, not an error.
      const provider = await hasty.request('POST', '/api/connectors', { body: { name: 'silent-sms', type: 'messaging_provider', config: { base_url: silent.url, sender: 'shop', token: TOKEN } } });
      const tested = await hasty.request('POST', `/api/connectors/${provider.body.id}/test`);
      expect(tested.body).toEqual({ ok: false, message: `${new URL(silent.url).host} did not answer within ${TIMEOUT_MS} ms` });
      // And the server is still responsive afterwards.
      expect((await hasty.request('GET', '/api/connectors')).status).toBe(200);
      expect((await fetch(`${hasty.url}/healthz`)).status).toBe(200);
    } finally {
      await silent.close();
    }
  });

  it('cuts off a peer that dribbles its answer once OUTBOUND_TIMEOUT_MS has passed in all', async () => {
    // Each byte comes well within the limit, so only a limit on the whole call can end it.
    let writes = 0;
    const dribbler = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' });
      const timer = setInterval(() => {
        writes++;
        res.write(' ');
      }, TIMEOUT_MS / 4);
      res.on('close', () => clearInterval(timer));
    });
    await new Promise<void>((resolve) => dribbler.listen(0, '127.0.0.1', resolve));
    const host = `127.0.0.1:${(dribbler.address() as AddressInfo).port}`;
    try {
      const hook = await hasty.request('POST', '/api/connectors', { body: { name: 'dribbler', type: 'workflow_webhook', config: { webhook_url: `http://${host}/hook` } } });
      const started = Date.now();
      const res = await hasty.request('POST', `/api/connectors/${hook.body.id}/actions/send_message`, { body: { message: 'anyone?' } });
      expect(res.status, JSON.stringify(res.body)).toBe(502);
      expect(res.body.detail).toBe(`${host} did not answer within ${TIMEOUT_MS} ms`);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(writes).toBeGreaterThan(0);
      // The kernel hung up: the peer stops writing.
      const after = writes;
      await new Promise((resolve) => setTimeout(resolve, TIMEOUT_MS));
      expect(writes - after).toBeLessThanOrEqual(1);
      expect((await hasty.request('GET', '/api/connectors')).status).toBe(200);
    } finally {
      dribbler.closeAllConnections();
      await new Promise<void>((resolve) => dribbler.close(() => resolve()));
    }
  }, 20_000);

  it('refuses a private or loopback messaging provider unless OUTBOUND_ALLOWED_HOSTS lists it', async () => {
    const port = new URL(peer.url).port;
    const count = peer.received.length;
    for (const base_url of [peer.url, `http://localhost:${port}`, `http://[::1]:${port}`, 'http://10.0.0.5', 'http://169.254.169.254']) {
      const created = await strict.request('POST', '/api/connectors', { body: { name: `sms-${base_url}`, type: 'messaging_provider', config: { base_url, sender: 'shop', token: TOKEN } } });
      expect(created.status, base_url).toBe(201);
      const sent = await strict.request('POST', `/api/connectors/${created.body.id}/actions/send_message`, { body: { recipient: '+33612345678', text: 'hello' } });
      expect(sent.status, base_url).toBe(422);
      expect(sent.body.detail, base_url).toMatch(/private, loopback or link-local/);
      const tested = await strict.request('POST', `/api/connectors/${created.body.id}/test`);
      expect(tested.body.ok, base_url).toBe(false);
      expect(tested.body.message, base_url).toMatch(/private, loopback or link-local/);
    }
    expect(peer.received.length).toBe(count);
    // The same provider on the kernel that allows 127.0.0.1 is reached.
    const allowed = await t.request('POST', '/api/connectors', { body: { name: 'sms-allowed', type: 'messaging_provider', config: { base_url: peer.url, sender: 'shop', token: TOKEN } } });
    expect((await t.request('POST', `/api/connectors/${allowed.body.id}/actions/send_message`, { body: { recipient: '+33612345678', text: 'hello' } })).status).toBe(200);
    expect(peer.received.length).toBe(count + 1);
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
    // A secret sent back as the mask keeps its value while base_url (the target) stays the same;
    // the other fields change (a new target needs the token again: connector-secrets.test.ts).
    const patched = await t.request('PATCH', `/api/connectors/${created.body.id}`, { body: { config: { base_url: peer.url, sender: 'shop', token: '********' } } });
    expect(patched.body.config).toEqual({ base_url: peer.url, sender: 'shop', token: '********' });
    await t.request('POST', `/api/connectors/${created.body.id}/actions/send_message`, { body: { recipient: '+33612345678', text: 'again' } });
    expect(peer.received.at(-1)!.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(logs.join('\n')).not.toContain(TOKEN);
  });

  it('answers an action name that is not the type\u2019s own action (Object.prototype\u2019s names included) with a 404 problem', async () => {
    const hook = (await createWebhook()).body;
    const provider = (await t.request('POST', '/api/connectors', { body: { name: 'proto-sms', type: 'messaging_provider', config: { base_url: peer.url, sender: 'shop', token: TOKEN } } })).body;
    const database = (await t.request('POST', '/api/connectors', { body: { name: 'proto-pg', type: 'postgresql', config: { host: 'db.example.test', database: 'd', user: 'u' } } })).body;
    const count = peer.received.length;
    for (const connector of [hook, provider, database]) {
      for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', '__defineGetter__', 'isPrototypeOf', 'no_such_action']) {
        const res = await t.request('POST', `/api/connectors/${connector.id}/actions/${name}`, { body: {} });
        expect(res.status, `${connector.type} ${name}: ${res.text}`).toBe(404);
        expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        expect(res.body.detail).toContain(`no action "${name}"`);
      }
    }
    expect(peer.received.length).toBe(count);
    // A config key named after Object.prototype is no stored secret to keep: refused as an unknown field.
    const patched = await t.request('PATCH', `/api/connectors/${provider.id}`, { body: { config: { base_url: `${peer.url}/v2`, sender: 'shop', token: TOKEN, constructor: '********' } } });
    expect(patched.status, patched.text).toBe(400);
    expect(patched.body.errors.map((e: { path: string }) => e.path)).toEqual(['body.config.constructor']);
  });

  it('answers a host that does not resolve, and an IPv6 literal of a private range, with a 422, on every connector type', async () => {
    const create = async (type: string, config: Record<string, unknown>) => {
      const res = await strict.request('POST', '/api/connectors', { body: { name: `${type}-${Math.random().toString(36).slice(2, 8)}`, type, config } });
      expect(res.status, res.text).toBe(201);
      return res.body.id as number;
    };
    const act = (id: number, action: string, body: unknown) => strict.request('POST', `/api/connectors/${id}/actions/${action}`, { body });
    const problem = (res: TestResponse, status: number, detail: RegExp) => {
      expect(res.status, res.text).toBe(status);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(res.body.detail).toMatch(detail);
    };
    const unresolvable = /no-such-host\.invalid does not resolve/;
    const refused = /private, loopback or link-local/;

    problem(await act(await create('workflow_webhook', { webhook_url: 'http://no-such-host.invalid/hook' }), 'send_message', { message: 'x' }), 422, unresolvable);
    const sms = await create('messaging_provider', { base_url: 'http://no-such-host.invalid', sender: 'shop', token: TOKEN });
    problem(await act(sms, 'send_message', { recipient: '+33612345678', text: 'x' }), 422, unresolvable);
    expect((await strict.request('POST', `/api/connectors/${sms}/test`)).body).toMatchObject({ ok: false, message: expect.stringMatching(unresolvable) });

    for (const config of [{ host: 'no-such-host.invalid', database: 'd', user: 'u' }, { url: 'postgres://u:p@no-such-host.invalid:5432/d' }]) {
      const id = await create('postgresql', config);
      problem(await act(id, 'list_tables', {}), 422, unresolvable);
      const tested = await strict.request('POST', `/api/connectors/${id}/test`);
      expect(tested.status, tested.text).toBe(200);
      expect(tested.body).toMatchObject({ ok: false, message: expect.stringMatching(unresolvable) });
    }
    for (const literal of ['[::1]', '::1', '[::ffff:127.0.0.1]', '[fe80::1]', '[fd00::5]', '[::]']) {
      const ids = [await create('postgresql', { host: literal, database: 'd', user: 'u' })];
      if (literal.startsWith('[')) {
        ids.push(await create('postgresql', { url: `postgres://u:p@${literal}:5432/d` }));
        const url = `http://${literal}:8080/x`;
        problem(await act(await create('workflow_webhook', { webhook_url: url }), 'send_message', { message: 'x' }), 422, refused);
        problem(await act(await create('messaging_provider', { base_url: url, sender: 'shop', token: TOKEN }), 'send_message', { recipient: '+33612345678', text: 'x' }), 422, refused);
      }
      for (const id of ids) {
        problem(await act(id, 'list_tables', {}), 422, refused);
        expect((await strict.request('POST', `/api/connectors/${id}/test`)).body, literal).toMatchObject({ ok: false, message: expect.stringMatching(refused) });
      }
    }
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

/** Connector types are a checked extension point: one per name, each of the shape the connectors plugin expects. */
describe.each(DIALECTS)('connector types contributed by other plugins (%s)', (dialect) => {
  let t: TestKernel;
  let extra: { dir: string; remove(): void };

  beforeAll(async () => {
    extra = tempDir('dp-connector-types-');
    const typePlugin = (id: string, description: string, more: Record<string, unknown> = {}) =>
      writeManifest(extra.dir, { id, kind: 'connector', description, depends_on: ['connectors'], ...more }, 'connector-type');
    typePlugin('echo-connector', 'echo');
    // A second plugin bringing a type of a name already taken: it must not replace the first.
    typePlugin('impostor-webhook', 'workflow_webhook');
    // A manifest contribution without the shape of a connector type (no description, no actions…).
    typePlugin('malformed-connector', 'fine_name', { contributes: { 'connectors.types': [{ type: 'half_a_type' }] } });
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), extra.dir] });
  });
  afterAll(async () => {
    await t?.stop();
    extra?.remove();
  });

  it('loads a new type, refuses a second type of a taken name and a malformed one, and the first keeps serving', async () => {
    const plugin = async (id: string) => (await t.request('GET', '/api/plugins')).body.find((p: { id: string }) => p.id === id);
    expect(await plugin('echo-connector')).toMatchObject({ state: 'loaded' });
    expect(await plugin('impostor-webhook')).toMatchObject({
      state: 'failed',
      reason_code: 'KRN_ERR_PLUGIN_CONTRIBUTION_DUPLICATE',
      reason: 'plugin "impostor-webhook" contributes "workflow_webhook" to extension point "connectors.types", which plugin "workflow_webhook" already contributes',
    });
    const malformed = await plugin('malformed-connector');
    expect(malformed).toMatchObject({ state: 'failed', reason_code: 'KRN_ERR_PLUGIN_CONTRIBUTION_INVALID' });
    expect(malformed.reason).toMatch(/"malformed-connector" contributes to extension point "connectors\.types" something it does not accept: description/);

    const types = await t.request('GET', '/api/connectors/types');
    expect(types.status, types.text).toBe(200);
    const byName = Object.fromEntries(types.body.map((type: { type: string; plugin_id?: string; description: string }) => [type.type, type]));
    expect(Object.keys(byName).sort()).toEqual(['echo', 'messaging_provider', 'postgresql', 'workflow_webhook']);
    expect(byName.workflow_webhook.description).not.toBe('Echoes its arguments');
    // The failed plugin's code contribution was withdrawn with it.
    expect(byName.fine_name).toBeUndefined();
    const echo = await t.request('POST', '/api/connectors', { body: { name: 'echoer', type: 'echo', config: {} } });
    expect(echo.status, echo.text).toBe(201);
    expect((await t.request('POST', `/api/connectors/${echo.body.id}/actions/echo`, { body: { hello: 'world' } })).body).toEqual({ result: { hello: 'world' } });
  });
});
