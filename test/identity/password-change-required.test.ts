import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { startTestKernel, type TestKernel } from '../harness/index.ts';

const TEMPORARY = 'Temporary-pass-42';
const CHOSEN = 'Chosen-by-me-2024!';

/** An editor created by the admin with a password of the admin's choosing, hence `must_reset_password`; signed in. */
async function newUser(t: TestKernel, username: string): Promise<{ id: number; token: string }> {
  const created = await t.request('POST', '/api/users', { body: { username, email: `${username}@example.test`, role: 'editor', password: TEMPORARY } });
  expect(created.status).toBe(201);
  expect(created.body.must_reset_password).toBe(true);
  const login = await t.request('POST', '/api/auth/login', { token: null, body: { username, password: TEMPORARY } });
  expect(login.status).toBe(200);
  expect(login.body.must_reset_password).toBe(true);
  return { id: created.body.id, token: login.body.access_token };
}

function expectPasswordChangeRequired(res: { status: number; headers: Headers; body: any }) {
  expect(res.status).toBe(403);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(res.body).toMatchObject({ status: 403, code: 'password_change_required' });
}

describe.each(DIALECTS)('REQUIRE_PASSWORD_CHANGE=true (%s)', (dialect) => {
  let t: TestKernel;
  beforeAll(async () => {
    t = await startTestKernel({ dialect, env: { REQUIRE_PASSWORD_CHANGE: 'true' } });
  });
  afterAll(() => t?.stop());

  it('a new user can only read /api/me and change the password; afterwards everything works', async () => {
    const { token } = await newUser(t, 'newcomer');
    expectPasswordChangeRequired(await t.request('GET', '/api/projects', { token }));
    expectPasswordChangeRequired(await t.request('POST', '/api/projects', { token, body: { key: 'EARLY', name: 'Too early' } }));
    expectPasswordChangeRequired(await t.request('POST', '/api/auth/tokens', { token, body: { name: 'too early' } }));

    const me = await t.request('GET', '/api/me', { token });
    expect(me.status).toBe(200);
    expect(me.body.user).toMatchObject({ username: 'newcomer', must_reset_password: true });

    const changed = await t.request('POST', '/api/auth/change-password', { token, body: { old_password: TEMPORARY, new_password: CHOSEN } });
    expect(changed.status).toBe(200);
    const fresh = changed.body.access_token;
    expect(changed.body.must_reset_password).toBe(false);
    expect((await t.request('GET', '/api/projects', { token: fresh })).status).toBe(200);
    expect((await t.request('POST', '/api/projects', { token: fresh, body: { key: 'NOW', name: 'Now' } })).status).toBe(201);
    expect((await t.request('GET', '/api/me', { token: fresh })).body.user.must_reset_password).toBe(false);
  });

  it('a personal access token is held back too once an admin resets the password, except to read /api/me and revoke itself', async () => {
    const { id, token } = await newUser(t, 'pat-holder');
    const jwt = (await t.request('POST', '/api/auth/change-password', { token, body: { old_password: TEMPORARY, new_password: CHOSEN } })).body.access_token;
    const minted = await t.request('POST', '/api/auth/tokens', { token: jwt, body: { name: 'laptop' } });
    expect(minted.status).toBe(201);
    const pat = minted.body.token;
    expect((await t.request('GET', '/api/projects', { token: pat })).status).toBe(200); // kept as a known caller

    expect((await t.request('POST', `/api/users/${id}/reset-password`)).status).toBe(202);
    expectPasswordChangeRequired(await t.request('GET', '/api/projects', { token: pat }));
    expect((await t.request('GET', '/api/me', { token: pat })).status).toBe(200);
    expect((await t.request('DELETE', `/api/auth/tokens/${minted.body.id}`, { token: pat })).status).toBe(200);
    expect((await t.request('GET', '/api/me', { token: pat })).status).toBe(401);
  });
});

describe.each(DIALECTS)('REQUIRE_PASSWORD_CHANGE off, the default (%s)', (dialect) => {
  let t: TestKernel;
  beforeAll(async () => {
    t = await startTestKernel({ dialect });
  });
  afterAll(() => t?.stop());

  it('a user with a temporary password is told so at login, and may do everything their role allows', async () => {
    const { token } = await newUser(t, 'newcomer');
    expect((await t.request('GET', '/api/me', { token })).body.user.must_reset_password).toBe(true);
    expect((await t.request('GET', '/api/projects', { token })).status).toBe(200);
    expect((await t.request('POST', '/api/projects', { token, body: { key: 'RIGHT', name: 'Right away' } })).status).toBe(201);
    expect((await t.request('POST', '/api/auth/tokens', { token, body: { name: 'laptop' } })).status).toBe(201);
  });
});
