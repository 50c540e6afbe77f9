import crypto from 'node:crypto';
import path from 'node:path';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../kernel/config.ts';
import { Kernel } from '../../kernel/kernel.ts';
import { createLogger } from '../../kernel/logger.ts';
import { DIALECTS, type DialectName } from '../harness/dialects.ts';
import { createScratchDatabase, REPO_ROOT, startTestKernel, tempDir, type TestKernel } from '../harness/index.ts';
import type { ScratchDatabase } from '../harness/scratch-database.ts';

/**
 * A kernel started the way test-kernel.ts starts one, but with the console output (`print`) and
 * every log line captured, and without the harness's ADMIN_PASSWORD: the bootstrap is under test.
 */
interface BootedKernel {
  kernel: Kernel;
  printed: string[];
  logs: string[];
  request(method: string, route: string, options?: { token?: string; body?: unknown }): Promise<{ status: number; body: any; text: string }>;
}

async function bootKernel(dataDir: string, database: ScratchDatabase, env: Record<string, string>): Promise<BootedKernel> {
  const settings = loadSettings({
    NODE_ENV: 'test',
    PORT: '0',
    DATA_DIR: dataDir,
    DATABASE_URL: database.url,
    MANIFESTS_DIR: path.join(REPO_ROOT, 'manifests'),
    PLUGIN_WATCH: 'false',
    AUTH_RATE_LIMIT_PER_SEC: '0',
    API_RATE_LIMIT_PER_SEC: '0',
    ...env,
  });
  const printed: string[] = [];
  const logs: string[] = [];
  const logger = createLogger('trace', { write: (line: string) => void logs.push(line) });
  const kernel = new Kernel({ settings, logger, print: (line) => void printed.push(line) });
  try {
    await kernel.start();
  } catch (err) {
    await kernel.stop().catch(() => undefined);
    throw err;
  }
  const url = kernel.url;
  return {
    kernel,
    printed,
    logs,
    async request(method, route, options = {}) {
      const headers: Record<string, string> = {};
      if (options.token) headers.authorization = `Bearer ${options.token}`;
      if (options.body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(`${url}${route}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
      const text = await res.text();
      return { status: res.status, body: /json/.test(res.headers.get('content-type') ?? '') && text ? JSON.parse(text) : text, text };
    },
  };
}

const decodeJwt = (token: string) => JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8')) as Record<string, unknown>;

const counts = async (kernel: Kernel) => {
  const db = kernel.storage.db;
  const users = await db.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  const orgs = await db.selectFrom('organizations').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  const members = await db.selectFrom('organization_members').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return { users: Number(users.n), organizations: Number(orgs.n), members: Number(members.n) };
};

/** Kernels booted on scratch databases, each stopped and each database dropped after the suite. */
function scratchKernels(dialect: DialectName) {
  const scratch: { remove(): void; drop(): Promise<void> }[] = [];
  const running: Kernel[] = [];
  const fresh = async () => {
    const temp = tempDir();
    const database = await createScratchDatabase(dialect, temp.dir);
    scratch.push({ remove: temp.remove, drop: database.drop });
    return { dataDir: temp.dir, database };
  };
  const boot = async (...args: Parameters<typeof bootKernel>) => {
    const booted = await bootKernel(...args);
    running.push(booted.kernel);
    return booted;
  };
  const stop = async (kernel: Kernel) => {
    running.splice(running.indexOf(kernel), 1);
    await kernel.stop();
  };
  afterAll(async () => {
    for (const kernel of running) await kernel.stop().catch(() => undefined);
    for (const s of scratch) {
      await s.drop();
      s.remove();
    }
  });
  return { fresh, boot, stop };
}

describe.each(DIALECTS)('bootstrap (%s)', (dialect: DialectName) => {
  const { fresh, boot, stop } = scratchKernels(dialect);

  it('creates organization 1 and the admin from ADMIN_USERNAME / ADMIN_PASSWORD / ADMIN_EMAIL', async () => {
    const { dataDir, database } = await fresh();
    const password = 'Given-Admin#Secret42';
    const k = await boot(dataDir, database, { ADMIN_USERNAME: 'chief', ADMIN_PASSWORD: password, ADMIN_EMAIL: 'Chief.Admin@Example.test' });
    expect(k.printed).toEqual([]);

    const org = await k.kernel.storage.db.selectFrom('organizations').selectAll().where('id', '=', 1).executeTakeFirst();
    expect(org).toBeDefined();
    expect(await counts(k.kernel)).toEqual({ users: 1, organizations: 1, members: 1 });

    const byName = await k.request('POST', '/api/auth/login', { body: { username: 'chief', password } });
    expect(byName.status).toBe(200);
    expect(byName.body.must_reset_password).toBe(false);
    expect(decodeJwt(byName.body.access_token).role).toBe('admin');
    for (const email of ['Chief.Admin@Example.test', 'chief.admin@example.test']) {
      const byEmail = await k.request('POST', '/api/auth/login', { body: { username: email, password } });
      expect(byEmail.status, email).toBe(200);
      expect(byEmail.body.must_reset_password, email).toBe(false);
    }

    const me = await k.request('GET', '/api/me', { token: byName.body.access_token });
    expect(me.status).toBe(200);
    expect(me.body.user).toMatchObject({ username: 'chief', role: 'admin', default_org_id: 1, must_reset_password: false });
    expect(me.body.current_org_id).toBe(1);
    expect(me.body.organizations.map((o: { id: number }) => o.id)).toEqual([1]);
    expect(k.logs.join('')).not.toContain(password);
  });

  it('without ADMIN_PASSWORD prints one random password once, which must be changed; a restart creates nothing', async () => {
    const { dataDir, database } = await fresh();
    const first = await boot(dataDir, database, { ADMIN_USERNAME: 'firstadmin', ADMIN_EMAIL: 'first@example.test' });
    expect(first.printed).toHaveLength(1);
    const line = first.printed[0];
    expect(line).toContain('firstadmin');

    // The password is one of the words of the line: exactly one of them signs in.
    const candidates = [...new Set(line.split(/\s+/).filter((w) => w.length >= 12))];
    const working: string[] = [];
    let answer: any;
    for (const candidate of candidates) {
      const res = await first.request('POST', '/api/auth/login', { body: { username: 'firstadmin', password: candidate } });
      if (res.status === 200) {
        working.push(candidate);
        answer = res.body;
      } else expect(res.status).toBe(401);
    }
    expect(working).toHaveLength(1);
    const password = working[0];
    expect(password.length).toBeGreaterThanOrEqual(16);
    expect(answer.must_reset_password).toBe(true);
    expect(first.logs.join('')).not.toContain(password);
    expect(await counts(first.kernel)).toEqual({ users: 1, organizations: 1, members: 1 });

    await stop(first.kernel);
    const second = await boot(dataDir, database, { ADMIN_USERNAME: 'firstadmin', ADMIN_EMAIL: 'first@example.test' });
    expect(second.printed).toEqual([]);
    expect(await counts(second.kernel)).toEqual({ users: 1, organizations: 1, members: 1 });
    const again = await second.request('POST', '/api/auth/login', { body: { username: 'firstadmin', password } });
    expect(again.status).toBe(200);
    expect(again.body.must_reset_password).toBe(true);

    // A different ADMIN_* on restart does not create a second admin either.
    await stop(second.kernel);
    const third = await boot(dataDir, database, { ADMIN_USERNAME: 'otheradmin', ADMIN_PASSWORD: 'Other-Admin#Secret42', ADMIN_EMAIL: 'other@example.test' });
    expect(third.printed).toEqual([]);
    expect(await counts(third.kernel)).toEqual({ users: 1, organizations: 1, members: 1 });
    expect((await third.request('POST', '/api/auth/login', { body: { username: 'otheradmin', password: 'Other-Admin#Secret42' } })).status).toBe(401);
  });
});

describe.each(DIALECTS)('JWT secret and algorithm (%s)', (dialect: DialectName) => {
  const { fresh, boot, stop } = scratchKernels(dialect);
  const admin = { username: 'signer', password: 'Signer-Admin#Secret42' };
  const newSecret = () => crypto.randomBytes(32).toString('hex');
  const signIn = async (k: BootedKernel) => {
    const res = await k.request('POST', '/api/auth/login', { body: admin });
    expect(res.status, res.text).toBe(200);
    return res.body.access_token as string;
  };
  const me = (k: BootedKernel, token: string) => k.request('GET', '/api/me', { token });

  it('rotating JWT_SECRET refuses every JWT signed with the old one, and the old secret brings them back', async () => {
    const { dataDir, database } = await fresh();
    const [secretA, secretB] = [newSecret(), newSecret()];
    const env = { ADMIN_USERNAME: admin.username, ADMIN_PASSWORD: admin.password };

    const first = await boot(dataDir, database, { ...env, JWT_SECRET: secretA });
    const tokenA = await signIn(first);
    expect((await me(first, tokenA)).status).toBe(200);
    await stop(first.kernel);

    const rotated = await boot(dataDir, database, { ...env, JWT_SECRET: secretB });
    const refused = await me(rotated, tokenA);
    expect(refused.status).toBe(401);
    expect(refused.body.detail).toMatch(/signature/);
    const tokenB = await signIn(rotated);
    expect((await me(rotated, tokenB)).status).toBe(200);
    await stop(rotated.kernel);

    // Old and new secrets are never accepted together (spec §5.12).
    const back = await boot(dataDir, database, { ...env, JWT_SECRET: secretA });
    expect((await me(back, tokenA)).status).toBe(200);
    expect((await me(back, tokenB)).status).toBe(401);
  });

  it('JWT_ALGORITHM=HS512 issues HS512 tokens and refuses an HS256 token signed with the same secret', async () => {
    const { dataDir, database } = await fresh();
    const secret = newSecret();
    const k = await boot(dataDir, database, { ADMIN_USERNAME: admin.username, ADMIN_PASSWORD: admin.password, JWT_SECRET: secret, JWT_ALGORITHM: 'HS512' });
    const token = await signIn(k);
    expect(JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString('utf8')).alg).toBe('HS512');
    expect((await me(k, token)).status).toBe(200);

    const { user_id, role } = decodeJwt(token);
    const signed = (alg: string) =>
      new SignJWT({ user_id, role }).setProtectedHeader({ alg, typ: 'JWT' }).setIssuedAt().setExpirationTime('10m').sign(new TextEncoder().encode(secret));
    expect((await me(k, await signed('HS512'))).status).toBe(200); // control: the token below differs in its algorithm only
    const hs256 = await me(k, await signed('HS256'));
    expect(hs256.status).toBe(401);
    expect(hs256.body.detail).toMatch(/algorithm/);
  });
});

describe.each(DIALECTS)('accounts without SMTP, login, deactivation (%s)', (dialect: DialectName) => {
  let t: TestKernel;
  let logs: string[];
  const EXPIRE_MINUTES = 5;

  beforeAll(async () => {
    logs = [];
    t = await startTestKernel({ dialect, env: { JWT_EXPIRE_MINUTES: String(EXPIRE_MINUTES) }, logLines: logs });
  });
  afterAll(async () => {
    await t?.stop();
  });

  const login = (username: string, password: string) => t.request('POST', '/api/auth/login', { token: null, body: { username, password } });

  it('without SMTP_URL a new user\u2019s temporary password goes to the mail_outbox table, and works', async () => {
    const created = await t.request('POST', '/api/users', { body: { username: 'outboxer', email: 'outboxer@example.test', role: 'viewer' } });
    expect(created.status).toBe(201);
    expect(created.body.must_reset_password).toBe(true);

    const rows = await t.kernel.storage.db.selectFrom('mail_outbox').selectAll().where('recipient', '=', 'outboxer@example.test').execute();
    expect(rows).toHaveLength(1);
    const body = String(rows[0].body).replace(/\r\n/g, '\n');
    const secrets = body.split('\n').filter((l) => /^\S{12,}$/.test(l));
    expect(secrets).toHaveLength(1);
    const temporary = secrets[0];
    expect(created.text).not.toContain(temporary);

    const res = await login('outboxer', temporary);
    expect(res.status).toBe(200);
    expect(res.body.must_reset_password).toBe(true);
    expect((await login('outboxer', temporary.slice(0, -1))).status).toBe(401);

    // The outbox is logged (recipient, subject), never the body with the password.
    const text = logs.join('');
    expect(text).toContain('outboxer@example.test');
    expect(text).not.toContain(temporary);
    const audit = await t.request('GET', '/api/audit?limit=500');
    expect(audit.status).toBe(200);
    expect(audit.text).not.toContain(temporary);
  });

  it('login: wrong password and unknown user are the same 401; a deactivated user is refused', async () => {
    const user = await t.userToken('editor', 'loginner');
    const ok = await login('loginner', 'user-password-1');
    expect(ok.status).toBe(200);
    expect(ok.body.token_type).toBe('bearer');
    expect(ok.body.must_reset_password).toBe(false);
    const byEmail = await login('LOGINNER@example.test', 'user-password-1');
    expect(byEmail.status).toBe(200);

    const wrong = await login('loginner', 'user-password-2');
    const unknown = await login('no-such-user', 'user-password-1');
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expect(wrong.body.detail).toBe(unknown.body.detail);
    expect(wrong.body.title).toBe(unknown.body.title);
    expect(wrong.body.access_token).toBeUndefined();

    expect((await t.request('DELETE', `/api/users/${user.id}`)).status).toBe(200);
    const deactivated = await login('loginner', 'user-password-1');
    expect(deactivated.status).toBe(401);
    expect(deactivated.body.access_token).toBeUndefined();
  });

  it('a failed login names the account only if one matches; an unknown name is kept as a keyed marker, never in clear', async () => {
    const known = await t.userToken('viewer', 'failer');
    const typed = 'Correct-Horse#Battery9';
    const attempts = [
      [typed, 'some-password-1'],
      [typed, 'some-password-2'],
      ['another-unknown-name', 'some-password-3'],
      ['failer', 'wrong-password-4'],
      ['FAILER@example.test', 'wrong-password-5'],
    ];
    const requestIds: string[] = [];
    for (const [username, password] of attempts) {
      const res = await login(username, password);
      expect(res.status).toBe(401);
      requestIds.push(res.headers.get('x-request-id')!);
    }

    const audit = await t.request('GET', '/api/audit?action=auth.login&limit=500');
    expect(audit.status).toBe(200);
    expect(audit.text).not.toContain(typed);
    expect(JSON.stringify(await t.kernel.storage.db.selectFrom('audit_log').selectAll().execute())).not.toContain(typed);

    type Row = { outcome: string; actor_user_id: number | null; actor_username: string | null; request_id: string; details: { reason?: string; login_marker?: string } };
    const [first, second, other, wrong, byEmail] = requestIds.map((id) => (audit.body.items as Row[]).find((r) => r.request_id === id)!);
    for (const row of [first, second, other]) {
      expect(row).toMatchObject({ outcome: 'failure', actor_user_id: null, actor_username: null, details: { reason: 'unknown user' } });
      expect(row.details.login_marker).toMatch(/^[0-9a-f]{12}$/);
    }
    expect(second.details.login_marker).toBe(first.details.login_marker);
    expect(other.details.login_marker).not.toBe(first.details.login_marker);
    // Keyed by a server secret: a plain hash of a guess does not find it.
    expect(first.details.login_marker).not.toBe(crypto.createHash('sha256').update(typed).digest('hex').slice(0, 12));
    for (const row of [wrong, byEmail]) {
      expect(row).toMatchObject({ outcome: 'failure', actor_user_id: known.id, actor_username: 'failer', details: { reason: 'wrong password' } });
      expect(row.details).not.toHaveProperty('login_marker');
    }
  });

  it('a JWT that worked is refused once its exp passes, with nothing else changed', async () => {
    const user = await t.userToken('viewer', 'shortlived');
    const exp = Math.floor(Date.now() / 1000) + 2;
    const token = await new SignJWT({ user_id: user.id, role: 'viewer' })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setExpirationTime(exp)
      .sign(new TextEncoder().encode(t.kernel.secrets.jwtSecret));
    expect((await t.request('GET', '/api/me', { token })).status).toBe(200);
    expect((await t.request('GET', '/api/me', { token })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, exp * 1000 - Date.now() + 100));
    const res = await t.request('GET', '/api/me', { token });
    expect(res.status).toBe(401);
    expect(res.body.detail).toMatch(/expired/);
  });

  it('the JWT carries user_id, role and exp = now + JWT_EXPIRE_MINUTES; GET /api/me describes the caller', async () => {
    await t.userToken('management', 'jwtuser');
    const before = Math.floor(Date.now() / 1000);
    const res = await login('jwtuser', 'user-password-1');
    const after = Math.ceil(Date.now() / 1000);
    expect(res.status).toBe(200);
    expect(res.body.expires_in).toBe(EXPIRE_MINUTES * 60);
    const payload = decodeJwt(res.body.access_token);
    const row = await t.kernel.storage.db.selectFrom('users').select(['id']).where('username', '=', 'jwtuser').executeTakeFirstOrThrow();
    expect(payload.user_id).toBe(row.id);
    expect(Number.isInteger(payload.user_id)).toBe(true);
    expect(payload.role).toBe('management');
    expect(typeof payload.exp).toBe('number');
    expect(payload.exp as number).toBeGreaterThanOrEqual(before + EXPIRE_MINUTES * 60 - 1);
    expect(payload.exp as number).toBeLessThanOrEqual(after + EXPIRE_MINUTES * 60 + 1);
    expect(payload).not.toHaveProperty('groups');
    expect(payload).not.toHaveProperty('capabilities');

    const me = await t.request('GET', '/api/me', { token: res.body.access_token });
    expect(me.status).toBe(200);
    expect(me.body.user).toMatchObject({ user_id: row.id, username: 'jwtuser', role: 'management', default_org_id: 1, is_active: true });
    expect(me.body.user).not.toHaveProperty('password_hash');
    expect(me.body.current_org_id).toBe(1);
    expect(me.body.organizations.map((o: { id: number }) => o.id)).toEqual([1]);
    expect(me.body.groups).toEqual([]);
    expect(Array.isArray(me.body.capabilities)).toBe(true);
    expect(me.body.capabilities).toContain('plugins.read');
    expect(me.body.capabilities).not.toContain('users.manage');

    const adminMe = await t.request('GET', '/api/me');
    expect(adminMe.body.capabilities).toContain('users.manage');
  });

  it('deactivation stops the user\u2019s JWT on the very next request; reactivation brings it back', async () => {
    const user = await t.userToken('viewer', 'deactivee');
    expect((await t.request('GET', '/api/me', { token: user.token })).status).toBe(200);

    const deactivated = await t.request('DELETE', `/api/users/${user.id}`);
    expect(deactivated.status).toBe(200);
    expect(deactivated.body.is_active).toBe(false);
    expect((await t.request('GET', '/api/me', { token: user.token })).status).toBe(401);
    expect((await t.request('GET', '/api/auth/tokens', { token: user.token })).status).toBe(401);

    const reactivated = await t.request('PATCH', `/api/users/${user.id}`, { body: { is_active: true } });
    expect(reactivated.status).toBe(200);
    expect(reactivated.body.is_active).toBe(true);
    const me = await t.request('GET', '/api/me', { token: user.token });
    expect(me.status).toBe(200);
    expect(me.body.user.username).toBe('deactivee');
    expect((await login('deactivee', 'user-password-1')).status).toBe(200);
  });
});
