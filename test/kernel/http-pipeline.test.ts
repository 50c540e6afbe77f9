import crypto from 'node:crypto';
import http from 'node:http';
import path from 'node:path';
import { SignJWT, UnsecuredJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { REPO_ROOT, startTestKernel, tempDir, writeManifest, type TestKernel, type TestResponse } from '../harness/index.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Every problem answer: RFC 9457 media type and fields, with the request id of the answer. */
function expectProblem(res: TestResponse, status: number) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(res.body).toMatchObject({ type: expect.any(String), title: expect.any(String), status, detail: expect.any(String), request_id: expect.any(String) });
  expect(res.body.title.length).toBeGreaterThan(0);
  expect(res.body.detail.length).toBeGreaterThan(0);
  expect(res.body.request_id).toBe(res.headers.get('x-request-id'));
}

const errorPaths = (res: TestResponse): string[] => (res.body.errors ?? []).map((e: { path: string }) => e.path);

describe.each(DIALECTS)('HTTP pipeline (%s)', (dialect) => {
  let t: TestKernel;
  let adminId: number;
  const manifests = tempDir();
  const secret = () => new TextEncoder().encode(t.kernel.secrets.jwtSecret);
  const nowSeconds = () => Math.floor(Date.now() / 1000);

  beforeAll(async () => {
    writeManifest(
      manifests.dir,
      {
        id: 'probe',
        router: { prefix: '/api/probe', tag: 'probe' },
        capabilities: [{ name: 'probe.special', description: 'Call the special probe route', roles: ['editor'] }],
      },
      'probe',
    );
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), manifests.dir], env: { BODY_LIMIT: '1kb' } });
    const admin = await t.kernel.storage.db.selectFrom('users').select('id').where('role', '=', 'admin').orderBy('id').executeTakeFirstOrThrow();
    adminId = admin.id;
  });
  afterAll(async () => {
    await t?.stop();
    manifests.remove();
  });

  describe('valid requests', () => {
    it('serves a valid POST with 201 and the validated body', async () => {
      const res = await t.request('POST', '/api/probe/echo', { body: { name: 'widget', count: 3 } });
      expect(res.status, res.text).toBe(201);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.body).toEqual({ name: 'widget', count: 3, mode: 'plain' });
      const loud = await t.request('POST', '/api/probe/echo?mode=loud', { body: { name: 'w', count: 1 } });
      expect(loud.status).toBe(201);
      expect(loud.body).toEqual({ name: 'w', count: 1, mode: 'loud' });
    });

    it('matches a path in any letter case and with a trailing slash, and decodes its parameters', async () => {
      for (const route of ['/api/PROBE/Items/42', '/api/probe/items/42/', '/api/probe/items/%34%32']) {
        const res = await t.request('GET', route);
        expect(res.status, route).toBe(200);
        expect(res.body, route).toEqual({ item_id: 42 });
      }
      // A parameter that does not decode is passed as sent, and its schema judges it.
      expect(errorPaths(await t.request('GET', '/api/probe/items/%E0%A4%A'))).toEqual(['params.item_id']);
    });

    it('hands the query on as sent: a repeated name as the array of its values, in order', async () => {
      const res = await t.request('GET', '/api/probe/query?tag=a&one=1&tag=b&tag=c&empty=&sp=a%20b+c');
      expect(res.status, res.text).toBe(200);
      expect(res.body.query).toEqual({ tag: ['a', 'b', 'c'], one: '1', empty: '', sp: 'a b c' });
      // A name of Object's own is a name like any other: it never reaches the prototype.
      const own = await t.request('GET', '/api/probe/query?constructor=x&toString=y&hasOwnProperty=z');
      expect(own.body.query).toEqual({ constructor: 'x', toString: 'y', hasOwnProperty: 'z' });
      // `__proto__` is refused, as in a body (see the 400s below): a schema's parse would drop it unseen.
      expect((await t.request('GET', '/api/probe/query?__proto__=x&after=1')).status).toBe(400);
      // Split as URLSearchParams splits, whether there is anything to decode (%66 is "f") or not:
      // empty parts skipped, a name without `=` empty, the name up to the first `=`.
      const split = { a: '', '': 'b', c: '', d: '=e', x: ['1;y=2', '3'] };
      expect((await t.request('GET', '/api/probe/query?&&a=&=b&c&d==e&x=1;y=2&x=3&')).body.query).toEqual(split);
      expect((await t.request('GET', '/api/probe/query?&&a=&=b&c&d==e&x=1;y=2&x=3&%66')).body.query).toEqual({ ...split, f: '' });
      // Thousands of repeats of one name are one array, read in one pass.
      const many = await t.request('GET', `/api/probe/query?${'r=1&'.repeat(3_000)}`);
      expect(many.status).toBe(200);
      expect(many.body.query.r).toHaveLength(3_000);
    });

    it('coerces a valid path parameter', async () => {
      const res = await t.request('GET', '/api/probe/items/42');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ item_id: 42 });
    });

    it('lists plugins from the repository manifests next to the fixture', async () => {
      const res = await t.request('GET', '/api/plugins');
      expect(res.status, res.text).toBe(200);
      expect(JSON.stringify(res.body)).toContain('"probe"');
    });
  });

  describe('400: validation failures name the failing fields', () => {
    it('a bad body names body.name and body.count', async () => {
      const res = await t.request('POST', '/api/probe/echo', { body: { name: '', count: 'three' } });
      expectProblem(res, 400);
      expect(errorPaths(res)).toEqual(expect.arrayContaining(['body.name', 'body.count']));
      for (const e of res.body.errors) expect(e.message).toEqual(expect.any(String));
    });

    it('a missing body field is named', async () => {
      const res = await t.request('POST', '/api/probe/echo', { body: { name: 'x' } });
      expectProblem(res, 400);
      expect(errorPaths(res)).toEqual(['body.count']);
    });

    it('a bad query enum names query.mode', async () => {
      const res = await t.request('POST', '/api/probe/echo?mode=shout', { body: { name: 'x', count: 1 } });
      expectProblem(res, 400);
      expect(errorPaths(res)).toEqual(['query.mode']);
    });

    it('a bad path parameter names params.item_id', async () => {
      const res = await t.request('GET', '/api/probe/items/abc');
      expectProblem(res, 400);
      expect(errorPaths(res)).toEqual(['params.item_id']);
    });

    it('a required query parameter that is missing is named', async () => {
      const res = await t.request('GET', '/api/probe/slow');
      expectProblem(res, 400);
      expect(errorPaths(res)).toEqual(['query.ms']);
    });

    it('malformed JSON is a 400 problem, not a 500', async () => {
      const res = await t.request('POST', '/api/probe/echo', { body: '{"name": "x", "count": ' });
      expectProblem(res, 400);
      expect(errorPaths(res)).toContain('body');
    });

    it('a malformed JSON body is never quoted back, only the position of the fault', async () => {
      const asForm = await t.request('POST', '/api/auth/login', { token: null, body: 'password=Secret-Value-123', headers: { 'content-type': 'application/json' } });
      expectProblem(asForm, 400);
      expect(asForm.body.detail).toMatch(/^request body is not valid JSON/);
      expect(asForm.text).not.toContain('Secret');
      expect(asForm.text).not.toContain('password=');

      const cut = await t.request('POST', '/api/auth/login', { token: null, body: '{"username": "admin", "password": "Secret-Value-123"' });
      expectProblem(cut, 400);
      expect(cut.body.detail).toBe('request body is not valid JSON at position 52');
      expect(errorPaths(cut)).toEqual(['body']);
      expect(cut.text).not.toContain('Secret');
    });
  });

  describe('401: credentials', () => {
    const special = (authorization?: string) => t.request('GET', '/api/probe/special', { token: null, headers: authorization ? { authorization } : {} });
    const signed = (payload: Record<string, unknown>, opts: { alg?: string; key?: Uint8Array; exp?: number } = {}) =>
      new SignJWT(payload)
        .setProtectedHeader({ alg: opts.alg ?? 'HS256', typ: 'JWT' })
        .setIssuedAt(nowSeconds() - 120)
        .setExpirationTime(opts.exp ?? nowSeconds() + 600)
        .sign(opts.key ?? secret());

    it('a token built the same way with the kernel secret is accepted (control)', async () => {
      const res = await special(`Bearer ${await signed({ user_id: adminId, role: 'admin' })}`);
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({ user: 'admin' });
    });

    it('no token', async () => {
      const res = await special();
      expectProblem(res, 401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    });

    it('a non-bearer scheme', async () => {
      expectProblem(await special(`Basic ${Buffer.from('admin:admin-password-1').toString('base64')}`), 401);
    });

    it('a garbage token', async () => {
      const res = await special('Bearer not.a.jwt');
      expectProblem(res, 401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
    });

    it('an expired token', async () => {
      const res = await special(`Bearer ${await signed({ user_id: adminId, role: 'admin' }, { exp: nowSeconds() - 60 })}`);
      expectProblem(res, 401);
      expect(res.body.detail).toMatch(/expired/i);
    });

    it('a token signed with another secret', async () => {
      const res = await special(`Bearer ${await signed({ user_id: adminId, role: 'admin' }, { key: crypto.randomBytes(48) })}`);
      expectProblem(res, 401);
    });

    it('a token with alg none', async () => {
      const token = new UnsecuredJWT({ user_id: adminId, role: 'admin' }).setIssuedAt().setExpirationTime('10m').encode();
      expect(token.split('.')[2]).toBe('');
      expectProblem(await special(`Bearer ${token}`), 401);
    });

    it('an HS512 token with the right secret when HS256 is configured', async () => {
      const res = await special(`Bearer ${await signed({ user_id: adminId, role: 'admin' }, { alg: 'HS512' })}`);
      expectProblem(res, 401);
      expect(res.body.detail).toMatch(/algorithm/i);
    });

    it('a well-signed token without user_id', async () => {
      expectProblem(await special(`Bearer ${await signed({ role: 'admin' })}`), 401);
    });

    it('a well-signed token for a user that does not exist', async () => {
      expectProblem(await special(`Bearer ${await signed({ user_id: 987654, role: 'admin' })}`), 401);
    });

    it('a deactivated user is refused on its next request', async () => {
      const user = await t.userToken('editor');
      const before = await t.request('GET', '/api/probe/special', { token: user.token });
      expect(before.status, before.text).toBe(200);
      await t.kernel.storage.db.updateTable('users').set({ is_active: false }).where('id', '=', user.id).execute();
      const after = await t.request('GET', '/api/probe/special', { token: user.token });
      expectProblem(after, 401);
      expect(after.body.detail).toMatch(/deactivated/);
      const org = await t.request('GET', '/api/probe/org', { token: user.token });
      expectProblem(org, 401);
    });
  });

  describe('403 and organization scope', () => {
    it('a missing capability is 403; the role that has it and the platform admin pass', async () => {
      const viewer = await t.userToken('viewer');
      const denied = await t.request('GET', '/api/probe/special', { token: viewer.token });
      expectProblem(denied, 403);
      expect(denied.body.detail).toContain('probe.special');
      const editor = await t.userToken('editor');
      const allowed = await t.request('GET', '/api/probe/special', { token: editor.token });
      expect(allowed.status, allowed.text).toBe(200);
      const admin = await t.request('GET', '/api/probe/special');
      expect(admin.status).toBe(200);
      expect(admin.body).toEqual({ user: 'admin' });
    });

    it('X-Org-Id of an organization the user is not a member of is 403; own organization and default pass', async () => {
      const other = await t.kernel.storage.db
        .insertInto('organizations')
        .values({ name: 'Somebody else', created_at: t.kernel.storage.now() })
        .returning('id')
        .executeTakeFirstOrThrow();
      expect(other.id).not.toBe(1);
      const viewer = await t.userToken('viewer');

      const foreign = await t.request('GET', '/api/probe/org', { token: viewer.token, headers: { 'X-Org-Id': String(other.id) } });
      expectProblem(foreign, 403);
      const missing = await t.request('GET', '/api/probe/org', { token: viewer.token, headers: { 'X-Org-Id': '999999' } });
      expectProblem(missing, 403);

      const own = await t.request('GET', '/api/probe/org', { token: viewer.token, headers: { 'X-Org-Id': '1' } });
      expect(own.status, own.text).toBe(200);
      expect(own.body).toEqual({ org_id: 1 });
      const byDefault = await t.request('GET', '/api/probe/org', { token: viewer.token });
      expect(byDefault.status).toBe(200);
      expect(byDefault.body).toEqual({ org_id: 1 });

      // a platform admin may enter any organization
      const admin = await t.request('GET', '/api/probe/org', { headers: { 'X-Org-Id': String(other.id) } });
      expect(admin.status, admin.text).toBe(200);
      expect(admin.body).toEqual({ org_id: other.id });
    });

    it('X-Org-Id that is not an integer is 400 naming the header', async () => {
      const res = await t.request('GET', '/api/probe/org', { headers: { 'X-Org-Id': 'abc' } });
      expectProblem(res, 400);
      expect(errorPaths(res)).toEqual(['headers.x-org-id']);
    });
  });

  describe('400: the NUL character (U+0000) anywhere in the input, before any handler', () => {
    const nul = (res: TestResponse, ...paths: string[]) => {
      expectProblem(res, 400);
      expect(errorPaths(res)).toEqual(paths);
      expect(res.body.detail).toMatch(/U\+0000/);
    };

    it('in a login name or password, without an audited sign-in attempt', async () => {
      const audited = async () => (await t.request('GET', '/api/audit?action=auth.login&limit=500')).body.items.length;
      const before = await audited();
      nul(await t.request('POST', '/api/auth/login', { token: null, body: { username: 'ad\u0000min', password: 'x' } }), 'body.username');
      nul(await t.request('POST', '/api/auth/login', { token: null, body: { username: 'admin', password: '\u0000' } }), 'body.password');
      expect(await audited()).toBe(before);
    });

    it('in a plugin\u2019s create, at any depth and in keys: nothing is stored', async () => {
      nul(await t.request('POST', '/api/projects', { body: { key: 'NULPROJ', name: 'bad\u0000name' } }), 'body.name');
      expect((await t.request('GET', '/api/projects?search=NULPROJ')).body.items).toEqual([]);
      const connector = { name: 'nul-hook', type: 'workflow_webhook', config: { webhook_url: 'https://example.test/x', nested: [{ 'k\u0000ey': 1 }, { ok: ['fine', 'x\u0000'] }] } };
      nul(await t.request('POST', '/api/connectors', { body: connector }), 'body.config.nested.1.ok.1', 'body.config.nested.0.k\\u0000ey');
      expect((await t.request('GET', '/api/connectors')).body).toEqual([]);
      nul(await t.request('POST', '/api/probe/echo', { body: '"\\u0000"' }), 'body');
    });

    it('in a PATCH: the record is left as it was', async () => {
      const created = await t.request('POST', '/api/projects', { body: { key: 'NULPATCH', name: 'Kept', description: 'kept' } });
      expect(created.status, created.text).toBe(201);
      nul(await t.request('PATCH', `/api/projects/${created.body.id}`, { body: { name: 'Changed', description: 'a\u0000b' } }), 'body.description');
      expect((await t.request('GET', `/api/projects/${created.body.id}`)).body).toMatchObject({ name: 'Kept', description: 'kept' });
    });

    it('a lone surrogate in a JSON string or key is refused as NUL is; a surrogate pair is a character like any other', async () => {
      const lone = (res: TestResponse, ...paths: string[]) => {
        expectProblem(res, 400);
        expect(errorPaths(res)).toEqual(paths);
        expect(res.body.detail).toMatch(/lone surrogate/);
      };
      lone(await t.request('POST', '/api/projects', { body: { key: 'LONEPROJ', name: 'bad\ud800name' } }), 'body.name');
      lone(await t.request('POST', '/api/projects', { body: { key: 'LONEPROJ', name: 'x', description: '\udc00' } }), 'body.description');
      const connector = { name: 'lone-hook', type: 'workflow_webhook', config: { webhook_url: 'https://example.test/x', nested: [{ 'k\udbffey': 1 }] } };
      lone(await t.request('POST', '/api/connectors', { body: connector }), 'body.config.nested.0.k\\udbffey');
      expect((await t.request('GET', '/api/projects?search=LONEPROJ')).body.items).toEqual([]);
      const paired = await t.request('POST', '/api/projects', { body: { key: 'PAIRPROJ', name: 'smile \ud83d\ude00' } });
      expect(paired.status, paired.text).toBe(201);
      expect(paired.body.name).toBe('smile \u{1f600}');
    });

    it('a JSON body nested deeper than 100 levels, naming the first value too deep; 100 levels pass this check', async () => {
      const nested = (levels: number): unknown => (levels === 0 ? 'x' : [nested(levels - 1)]);
      // The body is level 1, `nested` level 2: 99 more arrays make 101 levels.
      const deep = await t.request('POST', '/api/probe/echo', { body: { name: 'w', count: 1, nested: nested(100) } });
      expectProblem(deep, 400);
      expect(deep.body.errors).toEqual([{ path: `body.nested${'.0'.repeat(99)}`, message: 'nests deeper than 100 levels' }]);
      const within = await t.request('POST', '/api/probe/echo', { body: { name: 'w', count: 1, nested: nested(99) } });
      expect(within.status, within.text).toBe(201);
    });

    it('a compressed body that does not decompress as its Content-Encoding says is a 400 naming the body', async () => {
      for (const encoding of ['gzip', 'deflate', 'br']) {
        const res = await t.request('POST', '/api/probe/echo', { body: '{"name":"w","count":1}', headers: { 'content-encoding': encoding } });
        expectProblem(res, 400);
        expect(errorPaths(res), encoding).toEqual(['body']);
      }
      const unknown = await t.request('POST', '/api/probe/echo', { body: '{"name":"w","count":1}', headers: { 'content-encoding': 'zstd-ish' } });
      expectProblem(unknown, 415);
    });

    it('in a query value or a path parameter', async () => {
      nul(await t.request('GET', '/api/projects?search=a%00b'), 'query.search');
      nul(await t.request('GET', '/api/datasets?limit=10&search=%00'), 'query.search');
      nul(await t.request('GET', '/api/plugins/probe%00'), 'params.id');
      nul(await t.request('GET', '/api/statistics/datasets/1/columns/c%00'), 'params.column');
      expect((await t.request('GET', '/api/projects?search=a%01b')).status).toBe(200);
    });

    it('a query parameter named __proto__, however it is spelled (a schema would drop it unseen)', async () => {
      for (const query of ['__proto__=x', '%5F%5Fproto%5F%5F=x', '__%70roto__=x&search=a', 'search=a&__proto__=1&__proto__=2']) {
        const res = await t.request('GET', `/api/projects?${query}`);
        expectProblem(res, 400);
        expect(errorPaths(res), query).toEqual(['query.__proto__']);
      }
      expect((await t.request('GET', '/api/projects?search=proto')).status).toBe(200);
    });
  });

  describe('400: id path parameters are canonical decimal integers', () => {
    it('refuses every other spelling of an id, naming the parameter, on every kind of route', async () => {
      const project = await t.request('POST', '/api/projects', { body: { key: 'IDS', name: 'Ids' } });
      const id = project.body.id as number;
      expect((await t.request('GET', `/api/projects/${id}`)).status).toBe(200);
      const spellings = [`0x${id.toString(16)}`, `%20${id}`, `${id}%20`, `${id}e0`, `%2B${id}`, `0${id}`, `${id}.0`, '-1', '0', '9007199254740993', '1e400', 'Infinity'];
      for (const spelling of spellings) {
        const res = await t.request('GET', `/api/projects/${spelling}`);
        expectProblem(res, 400);
        expect(errorPaths(res), spelling).toEqual(['params.id']);
      }
      expectProblem(await t.request('PATCH', `/api/projects/0${id}`, { body: { name: 'x' } }), 400);
      expect((await t.request('GET', `/api/projects/${id}`)).body.name).toBe('Ids');
      const member = await t.request('DELETE', `/api/organizations/1/members/0x${adminId.toString(16)}`);
      expectProblem(member, 400);
      expect(errorPaths(member)).toEqual(['params.user_id']);
      const action = await t.request('POST', '/api/connectors/1e0/actions/send_message', { body: {} });
      expectProblem(action, 400);
      expect(errorPaths(action)).toEqual(['params.id']);
      const filter = await t.request('GET', '/api/datasets?project_id=0x1');
      expectProblem(filter, 400);
      expect(errorPaths(filter)).toEqual(['query.project_id']);
      expect((await t.request('GET', `/api/datasets?project_id=${id}`)).status).toBe(200);
    });

    it('an id beyond what an id column holds (2^31 - 1) is a 400 naming it, in a path, a query or a body, not a database error', async () => {
      for (const [method, route, field] of [
        ['GET', '/api/projects/2147483648', 'params.id'],
        ['GET', '/api/dashboards/9007199254740991', 'params.id'],
        ['GET', '/api/datasets?project_id=3000000000', 'query.project_id'],
      ] as const) {
        const res = await t.request(method, route);
        expectProblem(res, 400);
        expect(errorPaths(res)).toEqual([field]);
      }
      const body = await t.request('POST', '/api/datasets', { body: { name: 'too_far', project_id: 2_147_483_648 } });
      expectProblem(body, 400);
      expect(errorPaths(body)).toEqual(['body.project_id']);
      expectProblem(await t.request('GET', '/api/projects/2147483647'), 404);
    });
  });

  describe('routing errors', () => {
    it('an unknown route is a 404 problem with a request id', async () => {
      for (const route of ['/api/nothing-here', '/api/probe/nothing', '/not-api']) {
        const res = await t.request('GET', route);
        expectProblem(res, 404);
        expect(res.body.request_id).toMatch(UUID);
      }
    });

    it('a known path with another method is 405 with Allow', async () => {
      const res = await t.request('POST', '/api/probe', { body: {} });
      expectProblem(res, 405);
      const allow = (res.headers.get('allow') ?? '').split(/\s*,\s*/);
      expect(allow).toContain('GET');
      expect(allow).not.toContain('POST');
      const del = await t.request('DELETE', '/api/probe/echo');
      expectProblem(del, 405);
      expect((del.headers.get('allow') ?? '').split(/\s*,\s*/)).toContain('POST');
    });

    it('a body over BODY_LIMIT is 413', async () => {
      const res = await t.request('POST', '/api/probe/echo', { body: { name: 'x'.repeat(4096), count: 1 } });
      expectProblem(res, 413);
      // just under the limit passes
      const ok = await t.request('POST', '/api/probe/echo', { body: { name: 'x'.repeat(900), count: 1 } });
      expect(ok.status, ok.text).toBe(201);
    });

    it('a body that is not JSON is 415', async () => {
      const res = await t.request('POST', '/api/probe/echo', { body: 'name=x&count=1', headers: { 'content-type': 'text/plain' } });
      expectProblem(res, 415);
    });
  });

  describe('problems raised by handlers', () => {
    it.each([409, 422, 429, 501, 503])('%i is answered as problem details', async (status) => {
      const res = await t.request('GET', `/api/probe/problem/${status}`);
      expectProblem(res, status);
      expect(res.body.detail).toBe(`problem ${status} on purpose`);
      if (status === 429 || status === 503) expect(res.headers.get('retry-after')).toBe('7');
      else expect(res.headers.get('retry-after')).toBeNull();
    });

    it('a bug is a 500 with the request id and neither the message nor a stack', async () => {
      const res = await t.request('GET', '/api/probe/boom', { headers: { 'X-Request-Id': 'boom-req-1' } });
      expectProblem(res, 500);
      expect(res.body.request_id).toBe('boom-req-1');
      expect(res.text).not.toContain('secret internal detail');
      expect(res.text).not.toContain('/srv/app.ts');
      expect(res.text).not.toMatch(/\n\s+at /);
      expect(res.text).not.toContain('.ts:');
      expect(res.body).not.toHaveProperty('stack');
    });

    it('an answer that breaks its declared schema is a 500 without details', async () => {
      const res = await t.request('GET', '/api/probe/bad-response');
      expectProblem(res, 500);
      expect(res.text).not.toContain('not a number');
      expect(res.text).not.toContain('schema');
    });
  });

  describe('request id', () => {
    it('echoes the client X-Request-Id', async () => {
      const res = await t.request('GET', '/api/probe', { headers: { 'X-Request-Id': 'client-abc_123:4' } });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-request-id')).toBe('client-abc_123:4');
    });

    it('generates a fresh uuid when none is sent', async () => {
      const a = await t.request('GET', '/api/probe');
      const b = await t.request('GET', '/api/probe');
      expect(a.headers.get('x-request-id')).toMatch(UUID);
      expect(b.headers.get('x-request-id')).toMatch(UUID);
      expect(a.headers.get('x-request-id')).not.toBe(b.headers.get('x-request-id'));
    });

    it('replaces an unusable client id with a generated one', async () => {
      const res = await t.request('GET', '/api/probe', { headers: { 'X-Request-Id': 'x'.repeat(300) } });
      expect(res.headers.get('x-request-id')).toMatch(UUID);
    });

    it('is on error answers too, echoed or generated', async () => {
      const echoed = await t.request('GET', '/api/probe/special', { token: null, headers: { 'X-Request-Id': 'err-req-9' } });
      expectProblem(echoed, 401);
      expect(echoed.headers.get('x-request-id')).toBe('err-req-9');
      expect(echoed.body.request_id).toBe('err-req-9');
      const generated = await t.request('GET', '/api/probe/items/abc');
      expectProblem(generated, 400);
      expect(generated.headers.get('x-request-id')).toMatch(UUID);
      const health = await t.request('GET', '/healthz', { headers: { 'X-Request-Id': 'health-1' } });
      expect(health.headers.get('x-request-id')).toBe('health-1');
    });
  });

  describe('headers sent twice, in any letter case', () => {
    /** A GET whose header lines go out as listed (fetch would merge a name sent twice into one line). */
    const rawGet = (route: string, lines: [string, string][]) =>
      new Promise<{ status: number; requestId: string }>((resolve, reject) => {
        const request = http.request(new URL(route, t.url), { method: 'GET', headers: [['Host', new URL(t.url).host], ...lines].flat() }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode!, requestId: String(res.headers['x-request-id']) }));
        });
        request.on('error', reject).end();
      });

    it('reads a header in any letter case; two X-Request-Id are one joined value, refused and replaced', async () => {
      expect((await rawGet('/api/probe', [['authorization', `Bearer ${t.adminToken}`], ['x-REQUEST-id', 'one-id']])).requestId).toBe('one-id');
      const twice = await rawGet('/api/probe', [['authorization', `Bearer ${t.adminToken}`], ['X-Request-Id', 'first'], ['X-Request-Id', 'second']]);
      expect(twice.status).toBe(200);
      expect(twice.requestId).toMatch(UUID);
    });

    it('keeps the first Authorization as Node does, whatever follows it', async () => {
      expect((await rawGet('/api/probe/special', [['AUTHORIZATION', `Bearer ${t.adminToken}`], ['Authorization', 'Bearer garbage']])).status).toBe(200);
      expect((await rawGet('/api/probe/special', [['Authorization', 'Bearer garbage'], ['authorization', `Bearer ${t.adminToken}`]])).status).toBe(401);
    });

    it('two X-Org-Id are one joined value: a 400, not either organization', async () => {
      expect((await rawGet('/api/probe/org', [['Authorization', `Bearer ${t.adminToken}`], ['X-Org-Id', '1'], ['x-org-id', '1']])).status).toBe(400);
      expect((await rawGet('/api/probe/org', [['Authorization', `Bearer ${t.adminToken}`], ['X-Org-Id', '1']])).status).toBe(200);
    });
  });

  describe('security headers', () => {
    // Each once: fetch joins a header sent twice into one value ("DENY, DENY"), which these would refuse.
    const expectSecurityHeaders = (res: { headers: Headers }, cacheControl = 'no-store') => {
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('content-security-policy')).toBe("default-src 'none'; frame-ancestors 'none'");
      expect(res.headers.get('cache-control')).toBe(cacheControl);
      expect(res.headers.get('x-request-id')).toMatch(UUID);
    };

    it.each([
      ['GET', '/api/probe', 200],
      ['HEAD', '/api/probe', 200],
      ['POST', '/api/probe/echo', 400],
      ['GET', '/api/unknown', 404],
      ['DELETE', '/api/probe', 405],
      ['GET', '/api/probe/boom', 500],
      ['GET', '/healthz', 200],
      ['GET', '/readyz', 200],
      ['GET', '/openapi.json', 200],
    ])('%s %s (%i) carries them', async (method, route, status) => {
      const res = await t.request(method, route, method === 'POST' ? { body: {} } : {});
      expect(res.status).toBe(status);
      expectSecurityHeaders(res);
    });

    it('are added to a head a route writes itself, bar one it names: each header once', async () => {
      const res = await t.request('GET', '/api/probe/own-head', { token: null });
      expect(res.status).toBe(200);
      expect(res.text).toBe('own');
      expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expectSecurityHeaders(res, 'max-age=60');
    });
  });

  describe('health', () => {
    it('GET /healthz is 200 and GET /readyz is ready', async () => {
      const live = await t.request('GET', '/healthz', { token: null });
      expect(live.status).toBe(200);
      const ready = await t.request('GET', '/readyz', { token: null });
      expect(ready.status).toBe(200);
      expect(ready.body).toEqual({ status: 'ready' });
    });

    it('neither appears in /openapi.json', async () => {
      const doc = await t.request('GET', '/openapi.json', { token: null });
      expect(doc.status).toBe(200);
      const paths = Object.keys(doc.body.paths);
      expect(paths).toContain('/api/probe/echo');
      expect(paths.filter((p) => /healthz|readyz/.test(p))).toEqual([]);
      expect(doc.text).not.toMatch(/healthz|readyz/);
    });
  });
});
