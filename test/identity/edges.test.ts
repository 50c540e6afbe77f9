import crypto from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../kernel/config.ts';
import { Kernel } from '../../kernel/kernel.ts';
import { createLogger } from '../../kernel/logger.ts';
import { DIALECTS, type DialectName } from '../harness/dialects.ts';
import { createScratchDatabase, REPO_ROOT, startTestKernel, tempDir, type TestKernel, type TestResponse } from '../harness/index.ts';

const PROBLEM = /^application\/problem\+json/;

function expectProblem(res: TestResponse, status: number) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(PROBLEM);
  expect(res.body).toMatchObject({ status, title: expect.any(String), detail: expect.any(String) });
}

/**
 * Edges of issue 3: rate limits, CORS, CSP reports, 401 versus 403, and secrets kept out of logs.
 */
describe.each(DIALECTS)('identity edges (%s)', (dialect) => {
  describe('auth rate limit (AUTH_RATE_LIMIT_PER_SEC=5)', () => {
    let t: TestKernel;
    beforeAll(async () => {
      t = await startTestKernel({ dialect, env: { AUTH_RATE_LIMIT_PER_SEC: '5' } });
    });
    afterAll(async () => {
      await t?.stop();
    });

    it('a burst on /api/auth/* gets 503 with Retry-After and problem details; other routes are not limited by it', async () => {
      const burst = await Promise.all(
        Array.from({ length: 8 }, () => t.request('POST', '/api/auth/login', { token: null, body: { username: 'nobody', password: 'wrong-password-1' } })),
      );
      const limited = burst.filter((r) => r.status === 503);
      const passed = burst.filter((r) => r.status !== 503);
      expect(limited.length).toBeGreaterThanOrEqual(1);
      expect(passed.length).toBeLessThan(8);
      expect(passed.length).toBeGreaterThanOrEqual(1);
      for (const r of passed) expect(r.status).toBe(401); // reached the application: wrong credentials
      for (const r of limited) {
        expectProblem(r, 503);
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      }
      // The auth bucket covers /api/auth/* only.
      expect((await t.request('GET', '/api/me')).status).toBe(200);
      // After Retry-After the bucket has refilled.
      await sleep(Number(limited[0].headers.get('retry-after')) * 1000 + 100);
      const again = await t.request('POST', '/api/auth/login', { token: null, body: { username: 'admin', password: 'admin-password-1' } });
      expect(again.status, again.text).toBe(200);
    });
  });

  describe('general API rate limit (API_RATE_LIMIT_PER_SEC=5)', () => {
    let t: TestKernel;
    beforeAll(async () => {
      t = await startTestKernel({ dialect, env: { API_RATE_LIMIT_PER_SEC: '5' } });
    });
    afterAll(async () => {
      await t?.stop();
    });

    it('health endpoints are never limited; /api/ bursts get 429 with Retry-After', async () => {
      for (let round = 0; round < 2; round += 1) {
        const health = await Promise.all(Array.from({ length: 20 }, () => t.request('GET', '/healthz', { token: null })));
        expect(health.map((r) => r.status)).toEqual(Array(20).fill(200));
      }
      const burst = await Promise.all(Array.from({ length: 12 }, () => t.request('GET', '/api/plugins')));
      const limited = burst.filter((r) => r.status === 429);
      const ok = burst.filter((r) => r.status === 200);
      expect(limited.length).toBeGreaterThanOrEqual(1);
      expect(ok.length).toBeGreaterThanOrEqual(1);
      expect(ok.length + limited.length).toBe(12);
      expect(ok.length).toBeLessThanOrEqual(7);
      for (const r of limited) {
        expectProblem(r, 429);
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      }
      // Health still answers while /api/ is limited.
      expect((await t.request('GET', '/healthz', { token: null })).status).toBe(200);
    });
  });

  describe('CORS, CSP reports, 401 versus 403', () => {
    let t: TestKernel;
    const APP = 'https://app.example';
    const EVIL = 'https://evil.example';
    beforeAll(async () => {
      t = await startTestKernel({ dialect, env: { CORS_ALLOWED_ORIGINS: APP } });
    });
    afterAll(async () => {
      await t?.stop();
    });

    it('an allowed origin gets Access-Control-Allow-Origin and a 204 preflight naming Authorization and X-Org-Id', async () => {
      const get = await t.request('GET', '/api/plugins', { headers: { origin: APP } });
      expect(get.status).toBe(200);
      expect(get.headers.get('access-control-allow-origin')).toBe(APP);
      expect(get.headers.get('vary') ?? '').toMatch(/origin/i);

      const preflight = await t.request('OPTIONS', '/api/groups', {
        token: null,
        headers: { origin: APP, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, x-org-id, content-type' },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get('access-control-allow-origin')).toBe(APP);
      const methods = (preflight.headers.get('access-control-allow-methods') ?? '').split(',').map((m) => m.trim().toUpperCase());
      expect(methods).toEqual(expect.arrayContaining(['GET', 'POST', 'PATCH', 'DELETE']));
      const headers = (preflight.headers.get('access-control-allow-headers') ?? '').split(',').map((h) => h.trim().toLowerCase());
      expect(headers).toEqual(expect.arrayContaining(['authorization', 'x-org-id', 'content-type']));
    });

    it('any other origin gets no allow header, and its preflight is refused', async () => {
      const get = await t.request('GET', '/api/plugins', { headers: { origin: EVIL } });
      expect(get.status).toBe(200);
      expect(get.headers.get('access-control-allow-origin')).toBeNull();

      const preflight = await t.request('OPTIONS', '/api/groups', { token: null, headers: { origin: EVIL, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization' } });
      expect(preflight.status).toBeGreaterThanOrEqual(400);
      expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
      expect(preflight.headers.get('access-control-allow-methods')).toBeNull();
      expect(preflight.headers.get('access-control-allow-headers')).toBeNull();
      // A look-alike of the allowed origin is another origin.
      const lookalike = await t.request('GET', '/api/plugins', { headers: { origin: `${APP}.evil.example` } });
      expect(lookalike.headers.get('access-control-allow-origin')).toBeNull();
    });

    it('POST /api/csp-report takes both report formats without auth, refuses other types (415) and large bodies (413)', async () => {
      const cspReport = {
        'csp-report': { 'document-uri': 'https://app.example/page', 'violated-directive': 'script-src', 'blocked-uri': 'https://cdn.evil.example/x.js' },
      };
      const legacy = await t.request('POST', '/api/csp-report', { token: null, headers: { 'content-type': 'application/csp-report' }, body: JSON.stringify(cspReport) });
      expect(legacy.status, legacy.text).toBe(204);
      expect(legacy.text).toBe('');

      const reports = [{ type: 'csp-violation', age: 10, url: 'https://app.example/page', body: { blockedURL: 'inline', effectiveDirective: 'script-src-elem' } }];
      const modern = await t.request('POST', '/api/csp-report', { token: null, headers: { 'content-type': 'application/reports+json' }, body: JSON.stringify(reports) });
      expect(modern.status, modern.text).toBe(204);

      const text = await t.request('POST', '/api/csp-report', { token: null, headers: { 'content-type': 'text/plain' }, body: JSON.stringify(cspReport) });
      expectProblem(text, 415);

      const huge = { 'csp-report': { 'document-uri': 'https://app.example/page', 'script-sample': 'a'.repeat(17 * 1024) } };
      const tooLarge = await t.request('POST', '/api/csp-report', { token: null, headers: { 'content-type': 'application/csp-report' }, body: JSON.stringify(huge) });
      expectProblem(tooLarge, 413);
      // Just under the limit is fine.
      const fits = { 'csp-report': { 'script-sample': 'a'.repeat(15 * 1024) } };
      expect((await t.request('POST', '/api/csp-report', { token: null, headers: { 'content-type': 'application/csp-report' }, body: JSON.stringify(fits) })).status).toBe(204);
    });

    it('401 for a missing or invalid token (with WWW-Authenticate), 403 for a valid one lacking the capability', async () => {
      const missing = await t.request('GET', '/api/users', { token: null });
      expectProblem(missing, 401);
      expect(missing.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect(missing.headers.get('x-content-type-options')).toBe('nosniff');

      for (const authorization of ['Bearer not-a-jwt', 'Basic YWRtaW46YWRtaW4=', 'Bearer svc_0000000000000000000000000000000000000000000000000']) {
        const res = await t.request('GET', '/api/users', { token: null, headers: { authorization } });
        expectProblem(res, 401);
        expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
      }

      const viewer = await t.userToken('viewer');
      const forbidden = await t.request('GET', '/api/users', { token: viewer.token });
      expectProblem(forbidden, 403);
      expect(forbidden.headers.get('www-authenticate')).toBeNull();
      expect(forbidden.body.detail).toMatch(/users\.manage/);

      // A valid PAT whose scopes leave the capability out is a 403 too, even for a platform admin.
      const pat = await t.request('POST', '/api/auth/tokens', { body: { name: 'scoped', scopes: ['groups.read'] } });
      expect(pat.status, pat.text).toBe(201);
      const scoped = await t.request('GET', '/api/users', { token: pat.body.token });
      expectProblem(scoped, 403);
      expect((await t.request('GET', '/api/groups', { token: pat.body.token })).status).toBe(200);
    });
  });

  describe('secrets never reach the log', () => {
    const lines: string[] = [];
    let kernel: Kernel;
    let base: string;
    let cleanup: () => Promise<void>;
    const suffix = crypto.randomBytes(6).toString('hex');
    const adminPassword = `Boot-${suffix}-pw1`;

    beforeAll(async () => {
      ({ kernel, cleanup } = await startLoggedKernel(dialect, adminPassword, lines));
      base = kernel.url;
    });
    afterAll(async () => {
      await cleanup?.();
    });

    async function call(method: string, route: string, opts: { token?: string; body?: unknown } = {}) {
      const headers: Record<string, string> = {};
      if (opts.token) headers.authorization = `Bearer ${opts.token}`;
      if (opts.body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(`${base}${route}`, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
      const text = await res.text();
      return { status: res.status, body: text && /json/.test(res.headers.get('content-type') ?? '') ? JSON.parse(text) : text, text };
    }

    async function outboxSecret(recipient: string, count: number): Promise<string> {
      for (let i = 0; i < 50; i += 1) {
        const rows = await kernel.storage.db.selectFrom('mail_outbox').select(['body']).where('recipient', '=', recipient).orderBy('id').execute();
        if (rows.length >= count) {
          const match = /\n\n(\S+)\n/.exec(rows[count - 1].body as string);
          if (!match) throw new Error(`no secret line in mail: ${rows[count - 1].body}`);
          return match[1];
        }
        await sleep(50);
      }
      throw new Error(`mail ${count} to ${recipient} never arrived`);
    }

    it('passwords, JWTs, PATs, temporary passwords and reset tokens appear in no log line and no audit row', async () => {
      const secrets: Record<string, string> = { adminPassword };

      const wrong = `Wrong-${suffix}-pw2`;
      secrets.wrongPassword = wrong;
      expect((await call('POST', '/api/auth/login', { body: { username: 'admin', password: wrong } })).status).toBe(401);

      const login = await call('POST', '/api/auth/login', { body: { username: 'admin', password: adminPassword } });
      expect(login.status, login.text).toBe(200);
      secrets.loginJwt = login.body.access_token;

      const newPassword = `Changed-${suffix}-pw3`;
      secrets.newPassword = newPassword;
      const changed = await call('POST', '/api/auth/change-password', { token: login.body.access_token, body: { old_password: adminPassword, new_password: newPassword } });
      expect(changed.status, changed.text).toBe(200);
      const relogin = await call('POST', '/api/auth/login', { body: { username: 'admin', password: newPassword } });
      expect(relogin.status).toBe(200);
      secrets.reloginJwt = relogin.body.access_token;

      const pat = await call('POST', '/api/auth/tokens', { token: relogin.body.access_token, body: { name: `pat-${suffix}` } });
      expect(pat.status, pat.text).toBe(201);
      secrets.pat = pat.body.token;
      expect((await call('GET', '/api/me', { token: pat.body.token })).status).toBe(200);

      // A user created with a password; an admin reset (temporary password by mail); a forgotten password.
      const userPassword = `Created-${suffix}-pw4`;
      secrets.userPassword = userPassword;
      const email = `carol-${suffix}@example.test`;
      const user = await call('POST', '/api/users', { token: pat.body.token, body: { username: `carol-${suffix}`, email, role: 'viewer', password: userPassword } });
      expect(user.status, user.text).toBe(201);
      expect((await call('POST', `/api/users/${user.body.id}/reset-password`, { token: pat.body.token })).status).toBe(202);
      secrets.temporaryPassword = await outboxSecret(email, 1);
      expect((await call('POST', '/api/auth/login', { body: { username: email, password: secrets.temporaryPassword } })).status).toBe(200);

      expect((await call('POST', '/api/auth/forgot-password', { body: { email } })).status).toBe(202);
      secrets.resetToken = await outboxSecret(email, 2);
      const resetPassword = `Reset-${suffix}-pw5`;
      secrets.resetPassword = resetPassword;
      const reset = await call('POST', '/api/auth/reset-password', { body: { token: secrets.resetToken, new_password: resetPassword } });
      expect(reset.status, reset.text).toBe(200);
      secrets.resetJwt = reset.body.access_token;

      // A CSP report is logged (the capture works), and the log saw every step above.
      expect((await call('POST', '/api/csp-report', { body: { 'csp-report': { 'violated-directive': `script-src-${suffix}` } } })).status).toBe(204);
      await sleep(50);
      const log = lines.join('');
      expect(log).toContain(`script-src-${suffix}`);
      for (const route of ['/api/auth/login', '/api/auth/change-password', '/api/auth/tokens', '/api/auth/reset-password', '/api/users']) expect(log).toContain(`"path":"${route}"`);
      expect(log).toContain('"audit":"token.mint"');

      for (const [name, secret] of Object.entries(secrets)) {
        expect(secret.length, name).toBeGreaterThanOrEqual(10);
        const leaking = lines.filter((line) => line.includes(secret));
        expect(leaking, `${name} appears in the log`).toEqual([]);
      }
      const auditRows = JSON.stringify(await kernel.storage.db.selectFrom('audit_log').selectAll().execute());
      expect(auditRows).toContain('token.mint');
      for (const [name, secret] of Object.entries(secrets)) expect(auditRows.includes(secret), `${name} appears in the audit log`).toBe(false);
    });
  });
});

/**
 * A kernel like the harness's, but logging at the most verbose level into `lines`: the harness's
 * logger is silent, and this suite reads what the log would hold.
 */
async function startLoggedKernel(dialect: DialectName, adminPassword: string, lines: string[]) {
  const temp = tempDir();
  const database = await createScratchDatabase(dialect, temp.dir);
  const settings = loadSettings({
    NODE_ENV: 'test',
    PORT: '0',
    DATA_DIR: temp.dir,
    DATABASE_URL: database.url,
    MANIFESTS_DIR: path.join(REPO_ROOT, 'manifests'),
    PLUGIN_WATCH: 'false',
    ADMIN_PASSWORD: adminPassword,
    AUTH_RATE_LIMIT_PER_SEC: '0',
    API_RATE_LIMIT_PER_SEC: '0',
  });
  const logger = createLogger('trace', { write: (line: string) => void lines.push(line) });
  const kernel = new Kernel({ settings, logger, print: (line) => lines.push(line) });
  const cleanup = async () => {
    await kernel.stop().catch(() => undefined);
    await database.drop();
    temp.remove();
  };
  try {
    await kernel.start();
  } catch (err) {
    await cleanup();
    throw err;
  }
  return { kernel, cleanup };
}
