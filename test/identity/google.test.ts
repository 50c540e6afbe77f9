import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { startTestKernel, type TestKernel } from '../harness/index.ts';
import { startJwksServer, type IdTokenClaims, type JwksServer } from '../harness/jwks-server.ts';

const CLIENT_ID = 'test-client';
const ISSUER = 'https://accounts.google.com';

describe.each(DIALECTS)('sign-in with an identity provider ID token (%s)', (dialect) => {
  let t: TestKernel;
  let idp: JwksServer;
  /** Every ID token a test sent: none may end up in the audit log. */
  const sentTokens: string[] = [];

  beforeAll(async () => {
    idp = await startJwksServer();
    t = await startTestKernel({
      dialect,
      env: { IDP_JWKS_URL: idp.jwksUrl, IDP_CLIENT_ID: CLIENT_ID, IDP_ALLOWED_DOMAINS: 'example.test', IDP_ISSUERS: ISSUER },
    });
  });
  afterAll(async () => {
    await t?.stop();
    await idp?.close();
  });

  const inFiveMinutes = () => Math.floor(Date.now() / 1000) + 300;
  const claimsFor = (email: string, overrides: Partial<IdTokenClaims> = {}): IdTokenClaims => ({
    iss: ISSUER,
    aud: CLIENT_ID,
    email,
    email_verified: true,
    exp: inFiveMinutes(),
    ...overrides,
  });
  const exchange = async (idToken: string) => {
    sentTokens.push(idToken);
    return t.request('POST', '/api/auth/google', { token: null, body: { id_token: idToken } });
  };
  /** A fresh viewer in organization 1; its e-mail is `<username>@example.test`. */
  const newUser = async (username: string) => {
    const user = await t.userToken('viewer', username);
    return { ...user, email: `${username}@example.test` };
  };
  const expectRefused = async (idToken: string, reason: RegExp) => {
    const res = await exchange(idToken);
    expect(res.status).toBe(401);
    expect(res.body.access_token).toBeUndefined();
    expect(res.body.detail).toMatch(/identity provider token refused/);
    expect(res.body.detail).toMatch(reason);
    return res;
  };

  it('exchanges a valid ID token of an existing user for a working access token', async () => {
    const user = await newUser('google-ok');
    const res = await exchange(await idp.signIdToken(claimsFor(user.email)));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ token_type: 'bearer', must_reset_password: false });
    expect(typeof res.body.access_token).toBe('string');
    expect(res.body.access_token).not.toMatch(/^svc_/);
    expect(idp.fetches).toBeGreaterThanOrEqual(1);

    const me = await t.request('GET', '/api/me', { token: res.body.access_token });
    expect(me.status).toBe(200);
    expect(me.body.user.id).toBe(user.id);
    expect(me.body.user.email).toBe(user.email);
    expect(me.body.authenticated_via).toBe('jwt');
  });

  it('matches the e-mail case-insensitively', async () => {
    const user = await newUser('google-case');
    const res = await exchange(await idp.signIdToken(claimsFor(user.email.toUpperCase())));
    expect(res.status).toBe(200);
    const me = await t.request('GET', '/api/me', { token: res.body.access_token });
    expect(me.body.user.id).toBe(user.id);
  });

  it('refuses a token for another audience', async () => {
    const user = await newUser('google-aud');
    await expectRefused(await idp.signIdToken(claimsFor(user.email, { aud: 'some-other-client' })), /aud/);
  });

  it('refuses a token from another issuer', async () => {
    const user = await newUser('google-iss');
    await expectRefused(await idp.signIdToken(claimsFor(user.email, { iss: 'https://evil.example' })), /iss/);
  });

  it('refuses an expired token', async () => {
    const user = await newUser('google-exp');
    await expectRefused(await idp.signIdToken(claimsFor(user.email, { exp: Math.floor(Date.now() / 1000) - 600 })), /expired/);
  });

  it('refuses a token without exp, which would never expire', async () => {
    const user = await newUser('google-noexp');
    // The harness's signer always sets exp: for this one token, setting it does nothing.
    const setExpiry = vi.spyOn(SignJWT.prototype, 'setExpirationTime').mockImplementation(function (this: SignJWT) {
      return this;
    });
    let idToken: string;
    try {
      idToken = await idp.signIdToken(claimsFor(user.email));
    } finally {
      setExpiry.mockRestore();
    }
    expect(JSON.parse(Buffer.from(idToken.split('.')[1], 'base64url').toString('utf8'))).not.toHaveProperty('exp');
    await expectRefused(idToken, /claim exp missing/);
  });

  it('refuses a token signed by a key the JWKS does not publish (same kid)', async () => {
    const user = await newUser('google-sig');
    await expectRefused(await idp.signIdToken(claimsFor(user.email), { key: 'foreign' }), /signature/);
  });

  it('refuses a token signed by a key the JWKS does not publish (unknown kid)', async () => {
    const user = await newUser('google-kid');
    await expectRefused(await idp.signIdToken(claimsFor(user.email), { key: 'foreign', kid: 'not-published' }), /signature|key/);
  });

  it('refuses a token whose e-mail is not verified', async () => {
    const user = await newUser('google-unverified');
    await expectRefused(await idp.signIdToken(claimsFor(user.email, { email_verified: false })), /not verified/);
  });

  it('refuses an e-mail domain outside IDP_ALLOWED_DOMAINS, even for an existing user', async () => {
    const user = await newUser('google-domain');
    await t.kernel.storage.db.updateTable('users').set({ email: 'google-domain@elsewhere.test' }).where('id', '=', user.id).execute();
    await expectRefused(await idp.signIdToken(claimsFor('google-domain@elsewhere.test')), /domain.*elsewhere\.test.*not allowed/);
  });

  it('refuses an e-mail no user has', async () => {
    await expectRefused(await idp.signIdToken(claimsFor('nobody-here@example.test')), /no user/);
  });

  it('refuses a deactivated user', async () => {
    const user = await newUser('google-gone');
    const before = await exchange(await idp.signIdToken(claimsFor(user.email)));
    expect(before.status).toBe(200);
    const deactivated = await t.request('DELETE', `/api/users/${user.id}`);
    expect(deactivated.status).toBe(200);
    expect(deactivated.body.is_active).toBe(false);
    await expectRefused(await idp.signIdToken(claimsFor(user.email)), /deactivated/);
    // The JWT issued before the deactivation stops working too.
    expect((await t.request('GET', '/api/me', { token: before.body.access_token })).status).toBe(401);
  });

  it('refuses a malformed ID token', async () => {
    await expectRefused('not-a-jwt', /invalid token/);
  });

  it('audits every failure with its reason, and never stores an ID token', async () => {
    const res = await t.request('GET', '/api/audit?action=auth.google&limit=500');
    expect(res.status).toBe(200);
    const rows = res.body.items as Array<{ action: string; outcome: string; details: { reason?: string }; actor_username: string | null; actor_user_id: number | null }>;
    expect(rows.every((r) => r.action === 'auth.google')).toBe(true);
    const failures = rows.filter((r) => r.outcome === 'failure');
    const reasons = failures.map((r) => r.details.reason ?? '');
    for (const expected of [/aud/, /iss/, /expired/, /exp missing/, /signature/, /not verified/, /domain/, /no user/, /deactivated/]) {
      expect(reasons.some((reason) => expected.test(reason)), `an audited failure matching ${expected}`).toBe(true);
    }
    expect(failures.length).toBeGreaterThanOrEqual(10);
    expect(failures.find((r) => /no user/.test(r.details.reason ?? ''))?.actor_username).toBe('nobody-here@example.test');
    const successes = rows.filter((r) => r.outcome === 'success');
    expect(successes.length).toBeGreaterThanOrEqual(3);

    const everything = JSON.stringify(await t.kernel.storage.db.selectFrom('audit_log').selectAll().execute());
    for (const token of sentTokens) {
      expect(everything.includes(token)).toBe(false);
      expect(everything.includes(token.split('.')[2] ?? token)).toBe(false);
    }
  });
});
