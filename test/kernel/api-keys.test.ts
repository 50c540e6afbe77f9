import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, type TestKernel } from '../harness/index.ts';

const API = JSON.stringify(path.join(REPO_ROOT, 'kernel/plugin-api.ts'));
const ZOD = JSON.stringify(path.join(REPO_ROOT, 'node_modules/zod/index.js'));

/**
 * `keyring`: a third-party plugin as an API Services router would be, in a folder outside the
 * repository. It mints data API keys (kept hashed, in memory) for the caller's organization,
 * contributes an authenticator for them, and serves routes with `security: 'apiKey'`.
 */
const KEYRING = `import { createHash, randomBytes } from 'node:crypto';
import { z } from ${ZOD};
import { apiKeyAuthenticators, definePlugin, defineRoute, kernelServices, reply } from ${API};

const hash = (key: string) => createHash('sha256').update(key).digest('hex');
const anything = z.record(z.string(), z.unknown());

export default definePlugin({
  deps: { rateLimits: kernelServices.rateLimits },
  init: ({ rateLimits }, ctx) => {
    const keys = new Map<string, { id: number; name: string; orgId: number; capabilities: string[] }>();
    let calls = 0;
    ctx.contribute(apiKeyAuthenticators, {
      id: 'keyring',
      prefix: 'kr_',
      authenticate(key) {
        calls += 1;
        const found = keys.get(hash(key));
        return found ? { keyId: found.id, name: found.name, orgId: found.orgId, capabilities: found.capabilities, allowed: ['whoami'] } : null;
      },
    });
    const whoami = ({ principal, orgId }: { principal: object; orgId: number }) => ({ ...principal, capabilities: [...(principal as { capabilities: Set<string> }).capabilities].sort(), allowed: [...((principal as { allowed: Set<string> | null }).allowed ?? [])], route_org_id: orgId });
    return {
      routes: [
        defineRoute({
          method: 'post', path: '/keys', summary: 'Mint a key in the current organization', security: 'bearer', orgScoped: true,
          request: { body: z.object({ name: z.string(), capabilities: z.array(z.string()) }) },
          responses: { 201: { description: 'The key, shown once', schema: z.object({ id: z.number(), key: z.string() }) } },
          handler: ({ body, orgId }) => {
            const key = 'kr_' + randomBytes(24).toString('base64url');
            const id = keys.size + 1;
            keys.set(hash(key), { id, name: body.name, orgId, capabilities: body.capabilities });
            return reply(201, { id, key });
          },
        }),
        defineRoute({
          method: 'get', path: '/whoami', summary: 'The calling key', security: 'apiKey', capability: 'keyring.probe',
          responses: { 200: { description: 'The principal', schema: anything } },
          handler: async ({ principal, orgId, audit }) => {
            await audit.record({ action: 'keyring.whoami', targetType: 'api_key', targetId: principal.keyId });
            return whoami({ principal, orgId });
          },
        }),
        defineRoute({
          method: 'get', path: '/limited', summary: 'Two calls a minute per key', security: 'apiKey',
          responses: { 200: { description: 'Fine', schema: anything } },
          handler: async ({ principal }) => {
            await rateLimits.take(principal, { name: 'keyring.limited', limit: 2, windowMs: 60_000 });
            return { ok: true };
          },
        }),
        defineRoute({
          method: 'get', path: '/calls', summary: 'How often the authenticator ran', security: 'none',
          responses: { 200: { description: 'Count', schema: z.object({ calls: z.number() }) } },
          handler: () => ({ calls }),
        }),
      ],
    };
  },
});
`;

/** `keyless`: an apiKey route and no authenticator of its own. */
const KEYLESS = `import { z } from ${ZOD};
import { definePlugin, defineRoute } from ${API};
export default definePlugin({ deps: {}, init: () => ({ routes: [defineRoute({
  method: 'get', path: '', summary: 'Needs a key', security: 'apiKey',
  responses: { 200: { description: 'The key', schema: z.object({ key_id: z.string(), org_id: z.number() }) } },
  handler: ({ principal, orgId }) => ({ key_id: principal.keyId, org_id: orgId }),
})] }) });
`;

/** An authenticator whose contribution is named by the manifest's description: a duplicate id, or one that breaks the schema. */
const CONTRIBUTOR = `import { apiKeyAuthenticators, definePlugin } from ${API};
export default definePlugin({ deps: {}, init: (_services, ctx) => {
  const kind = ctx.manifest.description;
  if (kind === 'duplicate') ctx.contribute(apiKeyAuthenticators, { id: 'keyring', authenticate: () => null });
  else ctx.contribute(apiKeyAuthenticators, { id: 'Not An Id', prefix: 'has space', authenticate: 'yes' } as never);
} });
`;

/**
 * The repository's manifests but those of API Services (whose `dpk_` authenticator would be
 * installed from the start), their entries made absolute: this suite starts with no authenticator.
 */
function repositoryManifestsWithout(ids: string[], dir: string): string {
  const repository = path.join(REPO_ROOT, 'manifests');
  for (const file of fs.readdirSync(repository).filter((f) => f.endsWith('.json'))) {
    const manifest = JSON.parse(fs.readFileSync(path.join(repository, file), 'utf8')) as { id: string; entry: string };
    if (!ids.includes(manifest.id)) fs.writeFileSync(path.join(dir, file), JSON.stringify({ ...manifest, entry: path.resolve(repository, manifest.entry) }));
  }
  return dir;
}

function writePlugin(root: string, id: string, code: string, manifest: Record<string, unknown>): string {
  fs.mkdirSync(path.join(root, id), { recursive: true });
  fs.writeFileSync(path.join(root, id, 'index.ts'), code);
  const file = path.join(root, `${id}.json`);
  fs.writeFileSync(file, JSON.stringify({ id, version: '1.0.0', kind: 'router', entry: `./${id}/index.ts`, ...manifest }));
  return file;
}

/** One request written byte for byte on a socket, for what fetch refuses to send; resolves with the whole answer. */
function rawRequest(url: string, head: Buffer): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
    socket.write(head);
  });
}

describe.each(DIALECTS)('data API keys through a plugin\u2019s authenticator (%s)', (dialect) => {
  let t: TestKernel;
  const first = tempDir();
  const second = tempDir();
  const repository = tempDir();
  const logLines: string[] = [];
  let keyringFile: string;
  let orgB: number;
  let outsiderToken: string;
  /** Key of organization 1 with the probe capability (and capabilities a key may not hold). */
  let keyA: { id: number; key: string };
  /** Key of organization 1 without the probe capability. */
  let keyPlain: { id: number; key: string };
  /** Key of the outsider's organization. */
  let keyB: { id: number; key: string };

  const mint = async (body: { name: string; capabilities: string[] }, token?: string) => {
    const res = await t.request<{ id: number; key: string }>('POST', '/api/keyring/keys', { body, token });
    expect(res.status, res.text).toBe(201);
    return res.body;
  };
  const withKey = (key: string | undefined, headers: Record<string, string> = {}) => ({ token: null, headers: key === undefined ? headers : { 'x-api-key': key, ...headers } });
  const calls = async () => (await t.request<{ calls: number }>('GET', '/api/keyring/calls', { token: null })).body.calls;

  beforeAll(async () => {
    const capabilities = [{ name: 'keyring.probe', description: 'Call the keyring probe', roles: [] }];
    // Disabled at first: the apiKey route of `keyless` has no authenticator to turn to.
    keyringFile = writePlugin(first.dir, 'keyring', KEYRING, { router: { prefix: '/api/keyring', tag: 'keyring' }, capabilities, enabled: false });
    writePlugin(first.dir, 'keyless', KEYLESS, { router: { prefix: '/api/keyless', tag: 'keyless' } });
    t = await startTestKernel({ dialect, manifestDirs: [repositoryManifestsWithout(['publishing', 'api_service'], repository.dir), first.dir, second.dir], logLines, env: { API_KEY_RATE_LIMIT_PER_MIN: '40' } });
  });
  afterAll(async () => {
    await t?.stop();
    first.remove();
    second.remove();
    repository.remove();
  });

  it('answers 501 on an apiKey route while no authenticator is installed', async () => {
    const res = await t.request('GET', '/api/keyless', withKey('kr_anything'));
    expect(res.status).toBe(501);
    expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(res.body.detail).toBe('no data API key authenticator is installed');
  });

  it('installs a plugin\u2019s authenticator when the plugin loads', async () => {
    fs.writeFileSync(keyringFile, JSON.stringify({ ...JSON.parse(fs.readFileSync(keyringFile, 'utf8')), enabled: true }));
    await t.kernel.registry.syncFiles([keyringFile]);
    expect((await t.request('GET', '/api/plugins/keyring')).body.state).toBe('loaded');
    keyA = await mint({ name: 'reporting', capabilities: ['keyring.probe', 'users.manage', 'no.such.capability'] });
    keyPlain = await mint({ name: 'plain', capabilities: [] });
    const outsider = await t.outsider('keyring-outsider');
    orgB = outsider.orgId;
    outsiderToken = outsider.token;
    keyB = await mint({ name: 'theirs', capabilities: ['keyring.probe'] }, outsiderToken);
  });

  it('describes the apiKey scheme once a route takes a key, and its routes with it', async () => {
    const doc = (await t.request('GET', '/openapi.json', { token: null })).body;
    expect(doc.components.securitySchemes.apiKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
    expect(doc.paths['/api/keyring/whoami'].get.security).toEqual([{ apiKey: [] }]);
  });

  it('lets a valid key reach the route as an api_key principal of its organization', async () => {
    const res = await t.request('GET', '/api/keyring/whoami', withKey(keyA.key));
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      kind: 'api_key',
      keyId: String(keyA.id),
      name: 'reporting',
      orgId: 1,
      authenticator: 'keyring',
      // Only organization capabilities the catalogue knows: users.manage is platform-wide, the other unknown.
      capabilities: ['keyring.probe'],
      allowed: ['whoami'],
      route_org_id: 1,
    });
    // Also the key of another organization, in its own.
    const theirs = await t.request('GET', '/api/keyring/whoami', withKey(keyB.key));
    expect(theirs.body).toMatchObject({ orgId: orgB, route_org_id: orgB, name: 'theirs' });
  });

  it('refuses a wrong or missing key with a 401 problem that does not repeat the key', async () => {
    const wrong = `${keyA.key}x`;
    const refused = await t.request('GET', '/api/keyring/whoami', withKey(wrong));
    expect(refused.status).toBe(401);
    expect(refused.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(refused.body).toMatchObject({ status: 401, detail: 'invalid API key' });
    expect(refused.text).not.toContain(wrong);
    const missing = await t.request('GET', '/api/keyring/whoami', withKey(undefined));
    expect(missing.status).toBe(401);
    expect(missing.body.detail).toMatch(/missing API key: send X-API-Key/);
    // A user's bearer token is no API key.
    const bearer = await t.request('GET', '/api/keyring/whoami');
    expect(bearer.status).toBe(401);
  });

  it('keeps a key to its own organization (X-Org-Id)', async () => {
    const elsewhere = await t.request('GET', '/api/keyring/whoami', withKey(keyA.key, { 'x-org-id': String(orgB) }));
    expect(elsewhere.status).toBe(403);
    expect(elsewhere.body.detail).toBe(`organization ${orgB} does not exist or this API key does not belong to it`);
    const back = await t.request('GET', '/api/keyring/whoami', withKey(keyB.key, { 'x-org-id': '1' }));
    expect(back.status).toBe(403);
    const own = await t.request('GET', '/api/keyring/whoami', withKey(keyA.key, { 'x-org-id': '1' }));
    expect(own.status).toBe(200);
    const garbage = await t.request('GET', '/api/keyring/whoami', withKey(keyA.key, { 'x-org-id': '1 or 1=1' }));
    expect(garbage.status).toBe(400);
    expect(garbage.body.errors).toEqual([{ path: 'headers.x-org-id', message: 'must be an integer' }]);
  });

  it('checks the route\u2019s capability against the key\u2019s', async () => {
    const res = await t.request('GET', '/api/keyring/whoami', withKey(keyPlain.key));
    expect(res.status).toBe(403);
    expect(res.body.detail).toBe('this operation needs the capability "keyring.probe" (not granted to this API key)');
  });

  it('writes audit rows that name the key, never its secret', async () => {
    const res = await t.request<{ items: Record<string, unknown>[] }>('GET', `/api/audit?actor=api_key:${keyA.id}&action=keyring.whoami`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.items.length).toBeGreaterThan(0);
    expect(res.body.items[0]).toMatchObject({
      actor_kind: 'api_key',
      actor_api_key_id: String(keyA.id),
      actor_api_key_name: 'reporting',
      actor_authenticator: 'keyring',
      actor_user_id: null,
      actor_run_id: null,
      org_id: 1,
    });
    const byKind = await t.request<{ items: Record<string, unknown>[] }>('GET', '/api/audit?actor_kind=api_key');
    expect(byKind.body.items.every((row) => row.actor_kind === 'api_key')).toBe(true);
    const everything = await t.request('GET', '/api/audit?limit=500');
    for (const key of [keyA.key, keyB.key, keyPlain.key]) {
      expect(everything.text).not.toContain(key);
      expect(logLines.join('\n')).not.toContain(key);
    }
  });

  it('limits each key (API_KEY_RATE_LIMIT_PER_MIN) and lets plugins spend a principal\u2019s budget', async () => {
    const limited = await mint({ name: 'busy', capabilities: [] });
    expect((await t.request('GET', '/api/keyring/limited', withKey(limited.key))).status).toBe(200);
    expect((await t.request('GET', '/api/keyring/limited', withKey(limited.key))).status).toBe(200);
    const third = await t.request('GET', '/api/keyring/limited', withKey(limited.key));
    expect(third.status).toBe(429);
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Another key has its own budget.
    expect((await t.request('GET', '/api/keyring/limited', withKey(keyA.key))).status).toBe(200);

    const statuses: number[] = [];
    for (let i = 0; i < 41; i++) statuses.push((await t.request('GET', '/api/keyless', withKey(limited.key))).status);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(40 - 3);
    expect(statuses.at(-1)).toBe(429);
  });

  describe('hostile X-API-Key values never reach the authenticator', () => {
    it('refuses a huge key, a quoted key and two keys', async () => {
      const before = await calls();
      const huge = await t.request('GET', '/api/keyring/whoami', withKey(`kr_${'a'.repeat(10_000)}`));
      expect(huge.status).toBe(401);
      expect(huge.body.detail).toMatch(/at most 512 printable characters/);
      expect(huge.text.length).toBeLessThan(1000);
      const quoted = await t.request('GET', '/api/keyring/whoami', withKey(`"${keyA.key}"`));
      expect(quoted.status).toBe(401);
      const headers = new Headers({ 'x-api-key': keyA.key });
      headers.append('x-api-key', keyB.key);
      const two = await fetch(`${t.url}/api/keyring/whoami`, { headers });
      expect(two.status).toBe(401);
      expect(await calls()).toBe(before);
    });

    it('refuses NUL and non-ASCII bytes, and keeps serving', async () => {
      const before = await calls();
      const request = (value: Buffer) =>
        rawRequest(t.url, Buffer.concat([Buffer.from('GET /api/keyring/whoami HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-API-Key: '), value, Buffer.from('\r\n\r\n')]));
      const nul = await request(Buffer.from(`${keyA.key}\0`, 'latin1'));
      expect(nul).toMatch(/^HTTP\/1\.1 400 /);
      const latin = await request(Buffer.from(`kr_caf\xe9`, 'latin1'));
      expect(latin).toMatch(/^HTTP\/1\.1 401 /);
      expect(latin).toMatch(/content-type: application\/problem\+json/i);
      expect(await calls()).toBe(before);
      expect((await t.request('GET', '/api/keyring/whoami', withKey(keyA.key))).status).toBe(200);
    });
  });

  it('offers an authenticator only in the organizations its plugin serves, and an apiKey route only there', async () => {
    const switchPlugin = async (id: string, orgId: number, enabled: boolean) =>
      expect((await t.request('PUT', `/api/plugins/${id}/organizations/${orgId}`, { body: { enabled } })).status).toBe(200);
    await switchPlugin('keyring', orgB, false);
    expect((await t.request('GET', '/api/keyless', withKey(keyB.key))).status).toBe(401);
    expect((await t.request('GET', '/api/keyless', withKey(keyA.key))).status).toBe(200);
    await switchPlugin('keyring', orgB, true);
    await switchPlugin('keyless', 1, false);
    expect((await t.request('GET', '/api/keyless', withKey(keyA.key))).status).toBe(404);
    expect((await t.request('GET', '/api/keyless', withKey(keyB.key))).status).toBe(200);
    await switchPlugin('keyless', 1, true);
  });

  it('refuses a second authenticator with the same id and a malformed one; the first keeps serving', async () => {
    const files = [
      writePlugin(second.dir, 'keyring-copy', CONTRIBUTOR, { kind: 'extension', description: 'duplicate' }),
      writePlugin(second.dir, 'keyring-broken', CONTRIBUTOR, { kind: 'extension', description: 'broken' }),
    ];
    await t.kernel.registry.syncFiles(files);
    expect(await t.request('GET', '/api/plugins/keyring-copy').then((r) => r.body)).toMatchObject({
      state: 'failed',
      reason_code: 'KRN_ERR_PLUGIN_CONTRIBUTION_DUPLICATE',
    });
    const broken = (await t.request('GET', '/api/plugins/keyring-broken')).body;
    expect(broken).toMatchObject({ state: 'failed', reason_code: 'KRN_ERR_PLUGIN_CONTRIBUTION_INVALID' });
    expect(broken.reason).toMatch(/kernel\.api_key_authenticators/);
    expect((await t.request('GET', '/api/keyring/whoami', withKey(keyA.key))).status).toBe(200);
  });

  it('withdraws the authenticator when its plugin unloads', async () => {
    fs.writeFileSync(keyringFile, JSON.stringify({ ...JSON.parse(fs.readFileSync(keyringFile, 'utf8')), enabled: false }));
    await t.kernel.registry.syncFiles([keyringFile]);
    const res = await t.request('GET', '/api/keyless', withKey(keyA.key));
    expect(res.status).toBe(501);
  });
});
