import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../kernel/logger.ts';
import { Vault } from '../../kernel/vault.ts';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

const MASK = '********';

/** An HTTP peer on loopback that answers 200 and records the authorization header of each call. */
async function startPeer() {
  const authorizations: (string | undefined)[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      authorizations.push(req.headers.authorization);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    authorizations,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe.each(DIALECTS)('connector secrets (%s)', (dialect) => {
  let t: TestKernel;
  let provider: Awaited<ReturnType<typeof startPeer>>;
  let attacker: Awaited<ReturnType<typeof startPeer>>;
  const logs: string[] = [];
  const TOKEN = 'provider-token-5e1b0c';
  const PASSWORD = 'secretpw';
  const BAD_PORT_URL = `postgres://u:${PASSWORD}@127.0.0.1:99999/db`;

  beforeAll(async () => {
    provider = await startPeer();
    attacker = await startPeer();
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1' }, logLines: logs });
  });
  afterAll(async () => {
    await t?.stop();
    await provider?.close();
    await attacker?.close();
  });

  const create = async (name: string, type: string, config: Record<string, unknown>) => {
    const res = await t.request('POST', '/api/connectors', { body: { name, type, config } });
    expect(res.status, res.text).toBe(201);
    return res.body.id as number;
  };
  const patch = (id: number, config: Record<string, unknown>) => t.request('PATCH', `/api/connectors/${id}`, { body: { config } });
  const send = (id: number) => t.request('POST', `/api/connectors/${id}/actions/send_message`, { body: { recipient: '+33612345678', text: 'hello' } });

  it('publishes the target fields of each type', async () => {
    const types = Object.fromEntries((await t.request('GET', '/api/connectors/types')).body.map((x: { type: string; target_fields: string[] }) => [x.type, x.target_fields]));
    expect(types).toMatchObject({ messaging_provider: ['base_url'], workflow_webhook: ['webhook_url'], postgresql: ['url', 'host', 'port', 'ssl'] });
  });

  it('does not let a masked token follow a changed base_url', async () => {
    const id = await create('whatsapp', 'messaging_provider', { base_url: provider.url, sender: 'shop', token: TOKEN });
    const moved = await patch(id, { base_url: attacker.url, sender: 'shop', token: MASK });
    expect(moved.status).toBe(400);
    expect(moved.body.errors).toEqual([{ path: 'body.config.token', message: expect.stringMatching(/give this secret again/) }]);
    expect(moved.body.detail).toMatch(/config\.base_url/);
    // Nothing changed: the connector still calls the provider, and the attacker never hears of the token.
    expect((await t.request('GET', `/api/connectors/${id}`)).body.config.base_url).toBe(provider.url);
    expect((await send(id)).status).toBe(200);
    expect(provider.authorizations.at(-1)).toBe(`Bearer ${TOKEN}`);
    expect(attacker.authorizations).toEqual([]);

    // Same target: the masked token is kept. New target with the token given again: allowed.
    expect((await patch(id, { base_url: provider.url, sender: 'shop-2', token: MASK })).status).toBe(200);
    expect((await send(id)).status).toBe(200);
    expect(provider.authorizations.at(-1)).toBe(`Bearer ${TOKEN}`);
    expect((await patch(id, { base_url: attacker.url, sender: 'shop', token: 'their-own-token' })).status).toBe(200);
    expect((await send(id)).status).toBe(200);
    expect(attacker.authorizations).toEqual(['Bearer their-own-token']);
  });

  it('treats the webhook URL, itself the secret, as its target', async () => {
    const id = await create('hook', 'workflow_webhook', { webhook_url: `${provider.url}/hook/s3cret` });
    expect((await patch(id, { webhook_url: MASK })).status).toBe(200);
    expect((await patch(id, { webhook_url: `${attacker.url}/hook` })).status).toBe(200);
    expect((await t.request('GET', `/api/connectors/${id}`)).body.config).toEqual({ webhook_url: MASK });
  });

  it('does not let a masked database password follow a changed host, port, URL or TLS setting', async () => {
    const fields = { host: '127.0.0.1', port: 5432, database: 'db', user: 'u', password: PASSWORD, ssl: true };
    const id = await create('warehouse', 'postgresql', fields);
    for (const change of [{ host: 'db.attacker.example' }, { port: 6543 }, { ssl: false }]) {
      const res = await patch(id, { ...fields, ...change, password: MASK });
      expect(res.status, JSON.stringify(change)).toBe(400);
      expect(res.body.errors.map((e: { path: string }) => e.path)).toEqual(['body.config.password']);
    }
    expect((await patch(id, { ...fields, database: 'other', password: MASK })).status).toBe(200);
    expect((await patch(id, { ...fields, host: 'db.example', password: 'new-password' })).status).toBe(200);

    const byUrl = await create('warehouse-url', 'postgresql', { url: `postgres://u:${PASSWORD}@127.0.0.1:5432/db` });
    expect((await patch(byUrl, { url: MASK })).status).toBe(200);
    expect((await patch(byUrl, { url: 'postgres://u:new-password@db.example/db' })).status).toBe(200);
  });

  it('refuses an unparsable connection URL naming the field, and never echoes or logs it', async () => {
    for (const url of [BAD_PORT_URL, `postgres://u:${PASSWORD}%zz@127.0.0.1:5432/db`]) {
      const res = await t.request('POST', '/api/connectors', { body: { name: 'bad-url', type: 'postgresql', config: { url } } });
      expect(res.status, url).toBe(400);
      expect(res.body.errors[0].path).toBe('body.config.url');
      expect(res.text).not.toContain(PASSWORD);
    }
    const id = await create('good-url', 'postgresql', { url: `postgres://u:${PASSWORD}@127.0.0.1:5432/db` });
    const patched = await patch(id, { url: BAD_PORT_URL });
    expect(patched.status).toBe(400);
    expect(patched.text).not.toContain(PASSWORD);

    // A connector saved before URLs were checked: using it is a 400 naming the field, not a 500 that logs it.
    const sealed = new Vault(t.kernel.secrets.vaultKey).seal(BAD_PORT_URL);
    await t.kernel.storage.db.updateTable('connectors').set({ config: t.kernel.storage.encodeJson({ url: sealed, port: 5432, ssl: false }) }).where('id', '=', id).execute();
    for (const path of [`/api/connectors/${id}/test`, `/api/connectors/${id}/actions/list_tables`]) {
      const res = await t.request('POST', path, { body: {} });
      expect(res.status, path).toBe(400);
      expect(res.body.errors[0].path).toBe('config.url');
      expect(res.text).not.toContain(PASSWORD);
    }
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.join('\n')).not.toContain(PASSWORD);
  });
});

describe('logged errors', () => {
  it('leave out the URL a URL error carries and credentials in any URL', () => {
    const lines: string[] = [];
    const log = createLogger('info', { write: (line: string) => void lines.push(line) });
    let urlError: unknown;
    try {
      new URL('postgres://u:secretpw@127.0.0.1:99999/db');
    } catch (err) {
      urlError = err;
    }
    expect((urlError as { input?: string }).input).toContain('secretpw');
    log.error({ err: urlError }, 'unhandled error');
    const wrapped = Object.assign(new Error('could not reach https://bot:secretpw@hooks.example/x'), { target: { url: 'postgres://u:secretpw@db.example/db' } });
    log.error({ err: wrapped }, 'unhandled error');
    expect(lines).toHaveLength(2);
    expect(lines.join('\n')).not.toContain('secretpw');
    expect(JSON.parse(lines[0]).err).toMatchObject({ type: 'TypeError', code: 'ERR_INVALID_URL' });
    expect(JSON.parse(lines[1]).err).toMatchObject({ message: 'could not reach https://[redacted]@hooks.example/x', target: { url: 'postgres://[redacted]@db.example/db' } });
  });
});
