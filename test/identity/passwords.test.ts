import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { startTestKernel, type TestKernel, type TestResponse } from '../harness/index.ts';
import { secretLines, startSmtpServer, type ReceivedMail, type TestSmtpServer } from '../harness/smtp-server.ts';

const MAIL_FROM_ADDRESS = 'platform-mailer@example.test';
const MAIL_WAIT_MS = 10_000;
/** How long to wait before concluding that no mail is coming. */
const NO_MAIL_WAIT_MS = 1_500;

/** The one secret standing on a line of its own in a mail body. */
function secretOf(mail: ReceivedMail): string {
  const lines = secretLines(mail.text);
  expect(lines, `exactly one secret line in:\n${mail.text}`).toHaveLength(1);
  return lines[0];
}

const issuedAt = (jwt: string): number => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString('utf8')).iat;

/**
 * Waits until the clock has left the second the JWTs were issued in. `iat` has one-second
 * resolution, so a token issued in the same second as a password change cannot be told from one
 * issued by it, and is let through.
 */
async function pastIssueSecond(...jwts: string[]): Promise<void> {
  const wait = (Math.max(...jwts.map(issuedAt)) + 1) * 1000 - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}

describe.each(DIALECTS)('password flows and mail (%s)', (dialect) => {
  let t: TestKernel;
  let smtp: TestSmtpServer;
  let logs: string[];
  /** Every password and reset token used by this suite: none may ever be shown or stored in clear. */
  const secrets = new Set<string>();
  /** Every API answer of this suite. */
  const answers: string[] = [];

  const request = async <T = any>(method: string, path: string, options: { token?: string | null; body?: unknown } = {}): Promise<TestResponse<T>> => {
    const res = await t.request<T>(method, path, options);
    answers.push(res.text);
    return res;
  };
  const login = (username: string, password: string) => {
    secrets.add(password);
    return request('POST', '/api/auth/login', { token: null, body: { username, password } });
  };
  const createUser = (body: Record<string, unknown>) => {
    if (typeof body.password === 'string') secrets.add(body.password);
    return request('POST', '/api/users', { body });
  };
  const mailTo = (address: string, after = -1, timeoutMs = MAIL_WAIT_MS) => smtp.waitFor((m) => m.to.includes(address) && m.seq > after, timeoutMs);
  const lastSeq = () => smtp.messages.length - 1;
  const userRow = (id: number) => t.kernel.storage.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  beforeAll(async () => {
    smtp = await startSmtpServer();
    logs = [];
    t = await startTestKernel({ dialect, env: { SMTP_URL: smtp.url, MAIL_FROM: `Data Platform <${MAIL_FROM_ADDRESS}>` }, logLines: logs });
    secrets.add('admin-password-1');
  });
  afterAll(async () => {
    await t?.stop();
    await smtp?.close();
  });

  it('creating a user without a password e-mails a temporary one that must be changed', async () => {
    const created = await createUser({ username: 'alice', email: 'Alice@Example.test', role: 'editor' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ username: 'alice', email: 'alice@example.test', role: 'editor', must_reset_password: true, is_active: true });
    expect(Object.keys(created.body)).not.toContain('password');
    expect(created.text).not.toMatch(/password_hash|scrypt/i);

    const mail = await mailTo('alice@example.test');
    expect(mail.from).toBe(MAIL_FROM_ADDRESS);
    expect(mail.headers.from).toContain(MAIL_FROM_ADDRESS);
    const temporary = secretOf(mail);
    secrets.add(temporary);
    expect(temporary.length).toBeGreaterThanOrEqual(12);

    const first = await login('alice', temporary);
    expect(first.status).toBe(200);
    expect(first.body.must_reset_password).toBe(true);
    const token = first.body.access_token as string;

    // Wrong old password: 400, nothing changed.
    const newPassword = 'Blue-Harbor#4821';
    secrets.add(newPassword);
    const wrongOld = await request('POST', '/api/auth/change-password', { token, body: { old_password: 'not-the-password-7', new_password: newPassword } });
    expect(wrongOld.status).toBe(400);
    expect((await login('alice', temporary)).body.must_reset_password).toBe(true);
    expect((await login('alice', newPassword)).status).toBe(401);

    // Weak new passwords: 400 naming the rule, nothing changed.
    const weak: [string, RegExp][] = [
      ['Ab1!xyz', /at least 10 characters/],
      ['onlylettershere', /letters.*digit or symbol/],
      ['My-alice-Pass9!', /username/],
      ['password123', /well-known/],
    ];
    for (const [candidate, rule] of weak) {
      secrets.add(candidate);
      const res = await request('POST', '/api/auth/change-password', { token, body: { old_password: temporary, new_password: candidate } });
      expect(res.status, candidate).toBe(400);
      expect(res.body.errors?.[0]?.path, candidate).toBe('body.new_password');
      expect(`${res.body.detail} ${res.body.errors?.[0]?.message}`, candidate).toMatch(rule);
      expect((await login('alice', candidate)).status, candidate).toBe(401);
    }
    expect((await login('alice', temporary)).body.must_reset_password).toBe(true);

    const changed = await request('POST', '/api/auth/change-password', { token, body: { old_password: temporary, new_password: newPassword } });
    expect(changed.status).toBe(200);
    const after = await login('alice', newPassword);
    expect(after.status).toBe(200);
    expect(after.body.must_reset_password).toBe(false);
    expect((await login('alice', temporary)).status).toBe(401);
    const me = await request('GET', '/api/me', { token: after.body.access_token });
    expect(me.body.user.must_reset_password).toBe(false);
  });

  it('POST /api/users refuses weak passwords, duplicates, non-admins and anonymous callers', async () => {
    const weak = await createUser({ username: 'weakling', email: 'weakling@example.test', role: 'viewer', password: 'password123' });
    expect(weak.status).toBe(400);
    expect(weak.body.errors?.[0]?.path).toBe('body.password');
    expect(weak.body.detail).toMatch(/well-known/);
    expect((await login('weakling', 'password123')).status).toBe(401);
    const users = await request('GET', '/api/users?limit=500');
    expect(users.body.items.map((u: { username: string }) => u.username)).not.toContain('weakling');

    const strong = 'Granite-Path#7305';
    const created = await createUser({ username: 'dave', email: 'dave@example.test', role: 'viewer', password: strong });
    expect(created.status).toBe(201);
    expect(created.body.must_reset_password).toBe(true);
    const daveLogin = await login('dave', strong);
    expect(daveLogin.status).toBe(200);
    expect(daveLogin.body.must_reset_password).toBe(true);

    const duplicate = await createUser({ username: 'dave', email: 'dave2@example.test', role: 'viewer' });
    expect(duplicate.status).toBe(409);
    const duplicateEmail = await createUser({ username: 'dave2', email: 'DAVE@example.test', role: 'viewer' });
    expect(duplicateEmail.status).toBe(409);

    const viewer = await t.userToken('viewer');
    const forbidden = await request('POST', '/api/users', { token: viewer.token, body: { username: 'eve', email: 'eve@example.test', role: 'admin' } });
    expect(forbidden.status).toBe(403);
    const anonymous = await request('POST', '/api/users', { token: null, body: { username: 'eve', email: 'eve@example.test', role: 'admin' } });
    expect(anonymous.status).toBe(401);
    expect((await request('GET', '/api/users?limit=500')).body.items.map((u: { username: string }) => u.username)).not.toContain('eve');

    // A user created with a password gets no mail.
    await expect(mailTo('dave@example.test', -1, NO_MAIL_WAIT_MS)).rejects.toThrow(/no matching mail/);
  });

  it('an admin reset e-mails a temporary password and sets must_reset_password', async () => {
    const initial = 'Copper-Lantern#5512';
    const created = await createUser({ username: 'bob', email: 'bob@example.test', role: 'editor', password: initial });
    expect(created.status).toBe(201);
    const id = created.body.id as number;
    const bobToken = (await login('bob', initial)).body.access_token as string;
    const settled = 'Silver-Meadow#9034';
    secrets.add(settled);
    expect((await request('POST', '/api/auth/change-password', { token: bobToken, body: { old_password: initial, new_password: settled } })).status).toBe(200);
    expect((await login('bob', settled)).body.must_reset_password).toBe(false);

    const before = lastSeq();
    const viewer = await t.userToken('viewer');
    expect((await request('POST', `/api/users/${id}/reset-password`, { token: viewer.token })).status).toBe(403);
    const reset = await request('POST', `/api/users/${id}/reset-password`);
    expect(reset.status).toBe(202);

    const mail = await mailTo('bob@example.test', before);
    const temporary = secretOf(mail);
    secrets.add(temporary);
    expect(temporary).not.toBe(settled);

    const user = await request('GET', `/api/users/${id}`);
    expect(user.body.must_reset_password).toBe(true);
    expect((await login('bob', settled)).status).toBe(401);
    const withTemporary = await login('bob', temporary);
    expect(withTemporary.status).toBe(200);
    expect(withTemporary.body.must_reset_password).toBe(true);

    expect((await request('POST', '/api/users/999999/reset-password')).status).toBe(404);
  });

  it('forgot-password does not reveal accounts; the token is single-use, hashed, expiring and not burned by a weak password', async () => {
    const initial = 'Amber-Canyon#6620';
    const created = await createUser({ username: 'carol', email: 'carol@example.test', role: 'viewer', password: initial });
    expect(created.status).toBe(201);
    const id = created.body.id as number;

    const before = lastSeq();
    const known = await request('POST', '/api/auth/forgot-password', { token: null, body: { email: 'carol@example.test' } });
    const unknown = await request('POST', '/api/auth/forgot-password', { token: null, body: { email: 'nobody-here@example.test' } });
    expect(known.status).toBeGreaterThanOrEqual(200);
    expect(known.status).toBeLessThan(300);
    expect(unknown.status).toBe(known.status);
    expect(unknown.text).toBe(known.text);

    const mail = await mailTo('carol@example.test', before);
    const token = secretOf(mail);
    secrets.add(token);
    await expect(mailTo('nobody-here@example.test', before, NO_MAIL_WAIT_MS)).rejects.toThrow(/no matching mail/);

    const stored = await userRow(id);
    expect(stored.reset_token_hash).toBeTruthy();
    expect(stored.reset_token_hash).not.toBe(token);
    expect(stored.reset_token_hash).not.toContain(token);
    expect(stored.reset_token_expires_at).toBeTruthy();

    expect((await request('POST', '/api/auth/reset-password', { token: null, body: { token: 'not-a-real-token-at-all', new_password: 'Quiet-River#3141' } })).status).toBe(400);

    // A weak password is refused without burning the token.
    secrets.add('password123');
    const weak = await request('POST', '/api/auth/reset-password', { token: null, body: { token, new_password: 'password123' } });
    expect(weak.status).toBe(400);
    expect(weak.body.errors?.[0]?.path).toBe('body.new_password');
    expect((await userRow(id)).reset_token_hash).toBe(stored.reset_token_hash);
    expect((await login('carol', initial)).status).toBe(200);

    const fresh = 'Quiet-River#3141';
    secrets.add(fresh);
    const redeemed = await request('POST', '/api/auth/reset-password', { token: null, body: { token, new_password: fresh } });
    expect(redeemed.status).toBe(200);
    expect(redeemed.body.token_type).toBe('bearer');
    expect(typeof redeemed.body.access_token).toBe('string');
    const me = await request('GET', '/api/me', { token: redeemed.body.access_token });
    expect(me.status).toBe(200);
    expect(me.body.user.user_id).toBe(id);
    expect(me.body.user.username).toBe('carol');
    const relogin = await login('carol', fresh);
    expect(relogin.status).toBe(200);
    expect(relogin.body.must_reset_password).toBe(false);
    expect((await login('carol', initial)).status).toBe(401);

    // Single use.
    const again = await request('POST', '/api/auth/reset-password', { token: null, body: { token, new_password: 'Another-Field#2718' } });
    expect(again.status).toBe(400);
    expect((await login('carol', 'Another-Field#2718')).status).toBe(401);
    expect((await userRow(id)).reset_token_hash).toBeNull();

    // Expired.
    const before2 = lastSeq();
    expect((await request('POST', '/api/auth/forgot-password', { token: null, body: { email: 'CAROL@example.test' } })).status).toBe(known.status);
    const second = secretOf(await mailTo('carol@example.test', before2));
    secrets.add(second);
    expect(second).not.toBe(token);
    await t.kernel.storage.db
      .updateTable('users')
      .set({ reset_token_expires_at: new Date(Date.now() - 60_000).toISOString() })
      .where('id', '=', id)
      .execute();
    const expired = await request('POST', '/api/auth/reset-password', { token: null, body: { token: second, new_password: 'Late-Comet#1618' } });
    expect(expired.status).toBe(400);
    secrets.add('Late-Comet#1618');
    expect((await login('carol', 'Late-Comet#1618')).status).toBe(401);
    expect((await login('carol', fresh)).status).toBe(200);
  });

  it('forgot-password answers the same bytes for a known, a deactivated and an unknown address, doing the work after answering', async () => {
    const known = await createUser({ username: 'ivy', email: 'ivy@example.test', role: 'viewer', password: 'Maple-Harbor#5512' });
    const gone = await createUser({ username: 'jack', email: 'jack@example.test', role: 'viewer', password: 'Cedar-Valley#8830' });
    expect((await request('DELETE', `/api/users/${gone.body.id}`)).status).toBeLessThan(300);
    const audited = async () => (await request('GET', '/api/audit?action=auth.password.forgot&limit=500')).body.items.length as number;
    const auditedBefore = await audited();
    const before = lastSeq();
    const answers = await Promise.all(['ivy@example.test', 'jack@example.test', 'nobody-at-all@example.test', 'IVY@example.test'].map((email) => request('POST', '/api/auth/forgot-password', { token: null, body: { email } })));
    for (const res of answers) {
      expect(res.status).toBe(202);
      expect(res.text).toBe(answers[0].text);
      expect([...res.headers.entries()].filter(([name]) => !['date', 'x-request-id'].includes(name))).toEqual([...answers[0].headers.entries()].filter(([name]) => !['date', 'x-request-id'].includes(name)));
    }
    // The lookup, audit, token and mail follow: two mails to ivy, none to the others, four audit rows.
    await vi.waitFor(() => expect(smtp.messages.filter((m) => m.seq > before && m.to.includes('ivy@example.test'))).toHaveLength(2), { timeout: MAIL_WAIT_MS });
    await vi.waitFor(async () => expect(await audited()).toBe(auditedBefore + 4));
    await expect(mailTo('jack@example.test', before, NO_MAIL_WAIT_MS)).rejects.toThrow(/no matching mail/);
    expect((await userRow(known.body.id)).reset_token_hash).toBeTruthy();
    expect((await userRow(gone.body.id)).reset_token_hash).toBeNull();
    for (const mail of smtp.messages.filter((m) => m.seq > before)) secrets.add(secretOf(mail));
  });

  it('forgot-password answers before it looks anything up: 202 even while the users table is gone, the failure logged without the address', async () => {
    expect((await createUser({ username: 'kim', email: 'kim.secret-name@example.test', role: 'viewer', password: 'Birch-Signal#2291' })).status).toBe(201);
    const failures = () => logs.filter((line) => /forgot-password could not be completed/.test(line));
    const logged = failures().length;
    await sql`alter table users rename to users_away`.execute(t.kernel.storage.db);
    let known;
    try {
      known = await request('POST', '/api/auth/forgot-password', { token: null, body: { email: 'kim.secret-name@example.test' } });
      expect(known.status).toBe(202);
      await vi.waitFor(() => expect(failures().length).toBe(logged + 1));
    } finally {
      await sql`alter table users_away rename to users`.execute(t.kernel.storage.db);
    }
    // The same answer as for an address nobody has, asked once the table is back (asked before, its
    // own lookup, done after its answer, could meet the renamed table on a busy machine).
    const unknown = await request('POST', '/api/auth/forgot-password', { token: null, body: { email: 'nobody-at-all@example.test' } });
    expect(known.text).toBe(unknown.text);
    expect(failures().at(-1)).not.toContain('kim.secret-name');
    // Served again once the table is back.
    const before = lastSeq();
    expect((await request('POST', '/api/auth/forgot-password', { token: null, body: { email: 'kim.secret-name@example.test' } })).status).toBe(202);
    secrets.add(secretOf(await mailTo('kim.secret-name@example.test', before)));
  });

  describe('a password change or reset ends earlier sessions (JWTs), not personal access tokens', () => {
    const me = (token: string) => request('GET', '/api/me', { token });
    const expectEnded = async (token: string) => {
      const res = await me(token);
      expect(res.status).toBe(401);
      expect(res.body.detail).toMatch(/token issued before the password changed/);
    };
    const signedIn = async (username: string, password: string) => {
      const res = await login(username, password);
      expect(res.status, res.text).toBe(200);
      return res.body.access_token as string;
    };

    it('change-password: the other JWT is refused on its next request, the answered JWT and a PAT work', async () => {
      const initial = 'Cedar-Window#2741';
      expect((await createUser({ username: 'erin', email: 'erin@example.test', role: 'editor', password: initial })).status).toBe(201);
      const [one, two] = [await signedIn('erin', initial), await signedIn('erin', initial)];
      // Not through request(): the mint answer holds the PAT's secret, which the audit test below forbids in answers.
      const pat = await t.request('POST', '/api/auth/tokens', { token: one, body: { name: 'erin-pat' } });
      expect(pat.status, pat.text).toBe(201);
      for (const token of [one, two, pat.body.token]) expect((await me(token)).status).toBe(200); // known, and kept as callers
      await pastIssueSecond(one, two);

      const next = 'Maple-Orbit#8163';
      secrets.add(next);
      const changed = await request('POST', '/api/auth/change-password', { token: one, body: { old_password: initial, new_password: next } });
      expect(changed.status, changed.text).toBe(200);
      expect(changed.body).toMatchObject({ status: 'password changed', token_type: 'bearer', must_reset_password: false, expires_in: expect.any(Number) });

      await expectEnded(two);
      await expectEnded(one);
      const fresh = await me(changed.body.access_token);
      expect(fresh.status).toBe(200);
      expect(fresh.body.user).toMatchObject({ username: 'erin', must_reset_password: false });
      expect((await me(pat.body.token)).status).toBe(200);
      expect((await me(await signedIn('erin', next))).status).toBe(200);
    });

    it('admin reset: the user’s JWT is refused on its next request; the temporary password signs in anew', async () => {
      const initial = 'Birch-Signal#5307';
      const created = await createUser({ username: 'frank', email: 'frank@example.test', role: 'viewer', password: initial });
      expect(created.status).toBe(201);
      const token = await signedIn('frank', initial);
      expect((await me(token)).status).toBe(200);
      await pastIssueSecond(token);

      const before = lastSeq();
      expect((await request('POST', `/api/users/${created.body.id}/reset-password`)).status).toBe(202);
      const temporary = secretOf(await mailTo('frank@example.test', before));
      secrets.add(temporary);
      await expectEnded(token);
      expect((await me(await signedIn('frank', temporary))).status).toBe(200);
    });

    it('forgotten-password reset: earlier JWTs are refused, the answered JWT works', async () => {
      const initial = 'Aspen-Rocket#4419';
      expect((await createUser({ username: 'gina', email: 'gina@example.test', role: 'viewer', password: initial })).status).toBe(201);
      const token = await signedIn('gina', initial);
      expect((await me(token)).status).toBe(200);

      const before = lastSeq();
      expect((await request('POST', '/api/auth/forgot-password', { token: null, body: { email: 'gina@example.test' } })).status).toBe(202);
      const resetToken = secretOf(await mailTo('gina@example.test', before));
      secrets.add(resetToken);
      await pastIssueSecond(token);
      const fresh = 'Willow-Beacon#6082';
      secrets.add(fresh);
      const redeemed = await request('POST', '/api/auth/reset-password', { token: null, body: { token: resetToken, new_password: fresh } });
      expect(redeemed.status, redeemed.text).toBe(200);

      await expectEnded(token);
      expect((await me(redeemed.body.access_token)).status).toBe(200);
    });
  });

  it('a forgotten-password token expires RESET_TOKEN_TTL_MINUTES (default 60) after it is issued', async () => {
    const created = await createUser({ username: 'hank', email: 'hank@example.test', role: 'viewer', password: 'Spruce-Ladder#7731' });
    expect(created.status).toBe(201);
    const before = Date.now();
    expect((await request('POST', '/api/auth/forgot-password', { token: null, body: { email: 'hank@example.test' } })).status).toBe(202);
    // The token is made after the answer: wait for it.
    const row = await vi.waitFor(async () => {
      const stored = await userRow(created.body.id);
      if (!stored.reset_token_expires_at) throw new Error('no reset token yet');
      return stored;
    });
    const after = Date.now();
    const expires = Date.parse(String(row.reset_token_expires_at));
    const hour = 60 * 60_000;
    // The stored time may be rounded to the millisecond or the second by the database.
    expect(expires).toBeGreaterThanOrEqual(before + hour - 1000);
    expect(expires).toBeLessThanOrEqual(after + hour + 1000);
  });

  it('audits every flow and never shows or stores a password or reset token', async () => {
    const audit = await request('GET', '/api/audit?limit=500');
    expect(audit.status).toBe(200);
    const rows = audit.body.items as { action: string; outcome: string; target_id: string | null; details: Record<string, unknown> }[];
    const has = (action: string, outcome = 'success') => rows.some((r) => r.action === action && r.outcome === outcome);
    for (const action of ['user.create', 'auth.password.change', 'auth.password.forgot', 'auth.password.reset', 'user.password.reset_by_admin', 'auth.login']) {
      expect(has(action), action).toBe(true);
    }
    expect(has('auth.login', 'failure')).toBe(true);
    expect(has('auth.password.change', 'failure')).toBe(true);
    // Forgot-password is audited for unknown addresses too.
    expect(rows.filter((r) => r.action === 'auth.password.forgot').length).toBeGreaterThanOrEqual(3);

    // Every mail went out over SMTP: nothing in the development outbox.
    const outbox = await t.kernel.storage.db.selectFrom('mail_outbox').selectAll().execute();
    expect(outbox).toEqual([]);
    expect(logs.some((line) => /mail sent/.test(line))).toBe(true);

    expect(secrets.size).toBeGreaterThan(10);
    const auditText = audit.text;
    const answerText = answers.join('\n');
    const logText = logs.join('');
    for (const secret of secrets) {
      expect(auditText.includes(secret), `audit holds ${secret}`).toBe(false);
      expect(answerText.includes(secret), `an API answer holds ${secret}`).toBe(false);
      expect(logText.includes(secret), `the log holds ${secret}`).toBe(false);
    }
  });
});
