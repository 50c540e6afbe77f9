import crypto from 'node:crypto';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { startTestKernel, type TestKernel } from '../harness/index.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const DAY_MS = 86_400_000;
/** The documented shape (README, "Personal access tokens"): svc_ + 43 random base62 + 6 base62 checksum. */
const PAT_SHAPE = /^svc_[0-9A-Za-z]{49}$/;

/** The documented checksum: CRC32 of the 43 random characters, as 6 base62 digits, most significant first. */
function documentedChecksum(body: string): string {
  let value = zlib.crc32(body);
  let out = '';
  for (let i = 0; i < 6; i += 1) {
    out = BASE62[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out;
}

/** A secret in the current format, made by the test (for legacy rows). */
function checksummedSecret(): string {
  const body = Array.from(crypto.randomBytes(43), (b) => BASE62[b % 62]).join('');
  return `svc_${body}${documentedChecksum(body)}`;
}

/** The same secret with one character of the random part replaced. */
function flip(secret: string, at = 10): string {
  const replacement = secret[at] === 'A' ? 'B' : 'A';
  return secret.slice(0, at) + replacement + secret.slice(at + 1);
}

const sha256 = (value: string) => crypto.createHash('sha256').update(value).digest('hex');

describe.each(DIALECTS)('personal access tokens (%s)', (dialect) => {
  let t: TestKernel;
  let adminId: number;
  /** Every secret minted or planted in this suite: none may appear in a list or the audit log. */
  const secrets: string[] = [];
  const minted: number[] = [];
  const revoked: number[] = [];

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    const me = await t.request('GET', '/api/me');
    adminId = me.body.user.id;
  });
  afterAll(async () => {
    await t?.stop();
  });

  const hmac = (secret: string) => crypto.createHmac('sha256', t.kernel.secrets.patHashKey).update(secret).digest('hex');
  const mint = async (body: Record<string, unknown>, token: string = t.adminToken) => {
    const res = await t.request('POST', '/api/auth/tokens', { token, body });
    if (res.status === 201) {
      secrets.push(res.body.token);
      minted.push(res.body.id);
    }
    return res;
  };
  const mintOk = async (body: Record<string, unknown>, token?: string) => {
    const res = await mint(body, token);
    expect(res.status, res.text).toBe(201);
    return res.body as { id: number; name: string; token: string; created_at: string; expires_at: string | null; scopes: string[] | null };
  };
  const revokeOwn = async (id: number, token: string = t.adminToken) => {
    const res = await t.request('DELETE', `/api/auth/tokens/${id}`, { token });
    if (res.status === 200) revoked.push(id);
    return res;
  };
  const tokenRow = (id: number) => t.kernel.storage.db.selectFrom('personal_access_tokens').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
  const me = (token: string, headers?: Record<string, string>) => t.request('GET', '/api/me', { token, headers });

  describe('format and storage', () => {
    it('mints a checksummed svc_ secret with the documented fields, shown once', async () => {
      const res = await mint({ name: 'format check' });
      expect(res.status).toBe(201);
      const body = res.body;
      expect(Object.keys(body)).toEqual(expect.arrayContaining(['id', 'name', 'token', 'created_at', 'expires_at', 'scopes']));
      expect(Number.isInteger(body.id)).toBe(true);
      expect(body.name).toBe('format check');
      expect(body.scopes).toBeNull();
      expect(Number.isNaN(Date.parse(body.created_at))).toBe(false);
      expect(Math.abs(Date.parse(body.created_at) - Date.now())).toBeLessThan(60_000);

      const secret: string = body.token;
      expect(secret.startsWith('svc_')).toBe(true);
      expect(secret).toMatch(PAT_SHAPE);
      expect(secret).toHaveLength(4 + 43 + 6);
      expect(secret.slice(47)).toBe(documentedChecksum(secret.slice(4, 47)));
      // 43 base62 characters carry at least 32 random bytes.
      expect(43 * Math.log2(62)).toBeGreaterThanOrEqual(256);

      const ok = await me(secret);
      expect(ok.status).toBe(200);
      expect(ok.body.user.id).toBe(adminId);
      expect(ok.body.authenticated_via).toBe('pat');
    });

    it('refuses a secret with one character changed (401)', async () => {
      const { token: secret } = await mintOk({ name: 'checksum check' });
      for (const at of [4, 20, 46, 47, 52]) {
        const wrong = flip(secret, at);
        expect(wrong).not.toBe(secret);
        // The documented checksum no longer matches: a scanner (or the server) can tell it is a typo.
        expect(wrong.slice(47) === documentedChecksum(wrong.slice(4, 47)), `checksum of the flip at ${at}`).toBe(false);
        const res = await me(wrong);
        expect(res.status, `flip at ${at}`).toBe(401);
        expect(res.headers.get('www-authenticate')).toMatch(/Bearer/);
      }
      expect((await me(secret)).status).toBe(200);
    });

    it('never lists the secret again', async () => {
      const { id, token: secret } = await mintOk({ name: 'listed' });
      const list = await t.request('GET', '/api/auth/tokens');
      expect(list.status).toBe(200);
      const entry = list.body.find((x: { id: number }) => x.id === id);
      expect(entry).toMatchObject({ id, name: 'listed', user_id: adminId, state: 'active', revoked_at: null });
      expect(entry.token).toBeUndefined();
      expect(secret.startsWith(entry.token_prefix)).toBe(true);
      expect(entry.token_prefix.length).toBeLessThan(16);
      for (const s of secrets) {
        expect(list.text.includes(s)).toBe(false);
        expect(list.text.includes(s.slice(10))).toBe(false);
      }
      const admin = await t.request('GET', '/api/auth/tokens/admin');
      expect(admin.status).toBe(200);
      expect(admin.body.some((x: { id: number }) => x.id === id)).toBe(true);
      for (const s of secrets) expect(admin.text.includes(s.slice(10))).toBe(false);
    });

    it('stores HMAC-SHA256(patHashKey, secret) only: never the secret or its bare SHA-256', async () => {
      const { id, token: secret } = await mintOk({ name: 'stored' });
      const row = await tokenRow(id);
      expect(row.hash_kind).toBe('hmac');
      expect(row.token_hash).toBe(hmac(secret));
      expect(row.token_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(row.token_hash).not.toBe(sha256(secret));
      const text = JSON.stringify(row);
      expect(text.includes(secret)).toBe(false);
      expect(text.includes(secret.slice(10))).toBe(false);
      expect(text.includes(sha256(secret))).toBe(false);
      const anyRow = JSON.stringify(await t.kernel.storage.db.selectFrom('personal_access_tokens').selectAll().execute());
      expect(anyRow.includes(secret.slice(10))).toBe(false);
    });

    it.each([
      ['in the current format', checksummedSecret],
      ['from before the checksum', () => `svc_${crypto.randomBytes(24).toString('hex')}`],
    ])('authenticates a legacy SHA-256 row %s and upgrades it to HMAC on first use', async (_label, make) => {
      const viewer = await t.userToken('viewer');
      const secret = make();
      secrets.push(secret);
      const now = t.kernel.storage.now();
      const { id } = await t.kernel.storage.db
        .insertInto('personal_access_tokens')
        .values({ user_id: viewer.id, name: 'legacy', token_hash: sha256(secret), hash_kind: 'sha256', token_prefix: secret.slice(0, 10), created_at: now, expires_at: null })
        .returning('id')
        .executeTakeFirstOrThrow();
      expect((await tokenRow(id)).last_used_at).toBeNull();

      // A near miss of the legacy secret is not accepted.
      expect((await me(flip(secret, 12))).status).toBe(401);
      expect((await tokenRow(id)).hash_kind).toBe('sha256');

      const first = await me(secret);
      expect(first.status).toBe(200);
      expect(first.body.user.id).toBe(viewer.id);
      expect(first.body.authenticated_via).toBe('pat');
      const upgraded = await tokenRow(id);
      expect(upgraded.hash_kind).toBe('hmac');
      expect(upgraded.token_hash).toBe(hmac(secret));
      expect(upgraded.last_used_at).not.toBeNull();
      // No SHA-256 of it is left anywhere.
      const all = await t.kernel.storage.db.selectFrom('personal_access_tokens').select('token_hash').execute();
      expect(all.some((r) => r.token_hash === sha256(secret))).toBe(false);

      const second = await me(secret);
      expect(second.status).toBe(200);
      expect(second.body.user.id).toBe(viewer.id);
    });
  });

  describe('scopes', () => {
    it('lists the valid scope names', async () => {
      const res = await t.request('GET', '/api/auth/scopes');
      expect(res.status).toBe(200);
      const names = res.body.map((s: { name: string }) => s.name);
      expect(names).toEqual(expect.arrayContaining(['plugins.read', 'users.manage', 'org.admin', 'groups.read']));
      expect(names).not.toContain('no.such.scope');
    });

    it('refuses an unknown scope with a 400 naming it', async () => {
      const res = await mint({ name: 'bad scope', scopes: ['plugins.read', 'no.such.scope'] });
      expect(res.status).toBe(400);
      expect(res.body.detail).toContain('no.such.scope');
      expect(res.body.detail).not.toContain('plugins.read');
    });

    it('refuses a scope the owner does not hold with a 400', async () => {
      const viewer = await t.userToken('viewer');
      const res = await mint({ name: 'too much', scopes: ['users.manage'] }, viewer.token);
      expect(res.status).toBe(400);
      expect(res.body.detail).toContain('users.manage');
      const fine = await mint({ name: 'fine', scopes: ['plugins.read'] }, viewer.token);
      expect(fine.status).toBe(201);
      expect(fine.body.scopes).toEqual(['plugins.read']);
    });

    it('limits a scoped token to owner ∩ scopes', async () => {
      const scoped = await mintOk({ name: 'plugins only', scopes: ['plugins.read'] });
      expect(scoped.scopes).toEqual(['plugins.read']);
      expect((await t.request('GET', '/api/plugins', { token: scoped.token })).status).toBe(200);
      const users = await t.request('GET', '/api/users', { token: scoped.token });
      expect(users.status).toBe(403);
      expect(users.body.detail).toContain('users.manage');
      const who = await me(scoped.token);
      expect(who.body.capabilities).toEqual(['plugins.read']);
      // The owner's JWT still has the full set.
      expect((await t.request('GET', '/api/users')).status).toBe(200);
    });

    it('lets a scoped token manage no tokens (403): it could mint an unscoped one or revoke the owner\u2019s', async () => {
      const scoped = await mintOk({ name: 'narrow', scopes: ['plugins.read'] });
      const other = await mintOk({ name: 'another of mine' });
      const escape = await mint({ name: 'escape' }, scoped.token);
      expect(escape.status).toBe(403);
      expect(escape.body.detail).toMatch(/scoped token/);
      expect((await mint({ name: 'escape too', scopes: ['plugins.read'] }, scoped.token)).status).toBe(403);
      expect((await t.request('GET', '/api/auth/tokens', { token: scoped.token })).status).toBe(403);
      expect((await t.request('DELETE', `/api/auth/tokens/${other.id}`, { token: scoped.token })).status).toBe(403);
      expect((await me(other.token)).status).toBe(200);
      // An unscoped token holds the owner's full say.
      const full = await mintOk({ name: 'full say' });
      expect((await mint({ name: 'minted by a token' }, full.token)).status).toBe(201);
    });

    it('gives an unscoped token the owner\u2019s full permissions', async () => {
      const full = await mintOk({ name: 'everything' });
      expect(full.scopes).toBeNull();
      const users = await t.request('GET', '/api/users', { token: full.token });
      expect(users.status).toBe(200);
      expect(users.body.items.some((u: { id: number }) => u.id === adminId)).toBe(true);
    });
  });

  describe('lifetime', () => {
    it('expires after 90 days by default', async () => {
      const body = await mintOk({ name: 'default lifetime' });
      expect(body.expires_at).not.toBeNull();
      const lifetime = Date.parse(body.expires_at!) - Date.parse(body.created_at);
      expect(Math.abs(lifetime - 90 * DAY_MS)).toBeLessThan(60_000);
      expect(Math.abs(Date.parse(body.expires_at!) - (Date.now() + 90 * DAY_MS))).toBeLessThan(120_000);
    });

    it('honours expires_in_days', async () => {
      const body = await mintOk({ name: 'a week', expires_in_days: 7 });
      expect(Math.abs(Date.parse(body.expires_at!) - Date.parse(body.created_at) - 7 * DAY_MS)).toBeLessThan(60_000);
    });

    it('never expires with lifetime 0', async () => {
      const body = await mintOk({ name: 'forever', expires_in_days: 0 });
      expect(body.expires_at).toBeNull();
      expect((await tokenRow(body.id)).expires_at).toBeNull();
      expect((await me(body.token)).status).toBe(200);
    });

    it.each([[-1], [1.5], ['30'], [null]])('refuses expires_in_days = %j with a 400', async (value) => {
      const res = await mint({ name: 'bad lifetime', expires_in_days: value });
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.body)).toContain('expires_in_days');
    });

    it('refuses an expired token (401)', async () => {
      const body = await mintOk({ name: 'soon expired' });
      expect((await me(body.token)).status).toBe(200);
      await t.kernel.storage.db
        .updateTable('personal_access_tokens')
        .set({ expires_at: new Date(Date.now() - 60_000).toISOString() })
        .where('id', '=', body.id)
        .execute();
      const res = await me(body.token);
      expect(res.status).toBe(401);
      expect(res.body.detail).toMatch(/expired/);
      const listed = (await t.request('GET', '/api/auth/tokens')).body.find((x: { id: number }) => x.id === body.id);
      expect(listed.state).toBe('expired');
    });

    it('a token that worked is refused once its expiry passes, with nothing else changed', async () => {
      const body = await mintOk({ name: 'expires in a moment' });
      const expiresAt = Date.now() + 2000;
      await t.kernel.storage.db.updateTable('personal_access_tokens').set({ expires_at: new Date(expiresAt).toISOString() }).where('id', '=', body.id).execute();
      expect((await me(body.token)).status).toBe(200);
      expect((await me(body.token)).status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, expiresAt - Date.now() + 100));
      const res = await me(body.token);
      expect(res.status).toBe(401);
      expect(res.body.detail).toMatch(/expired/);
    });
  });

  describe('use and revocation', () => {
    it('stamps last_used_at on use', async () => {
      const body = await mintOk({ name: 'stamp' });
      const listed = async () => (await t.request('GET', '/api/auth/tokens')).body.find((x: { id: number }) => x.id === body.id);
      expect((await listed()).last_used_at).toBeNull();
      expect((await tokenRow(body.id)).last_used_at).toBeNull();
      const before = Date.now();
      expect((await me(body.token)).status).toBe(200);
      const after = await listed();
      expect(after.last_used_at).not.toBeNull();
      expect(Date.parse(after.last_used_at)).toBeGreaterThanOrEqual(before - 2_000);
      expect(Date.parse(after.last_used_at)).toBeLessThanOrEqual(Date.now() + 2_000);
      expect((await tokenRow(body.id)).last_used_at).not.toBeNull();
    });

    it('refuses an unknown, well-formed token (401)', async () => {
      const res = await me(checksummedSecret());
      expect(res.status).toBe(401);
    });

    it('stops a token the owner revokes on the very next request', async () => {
      const body = await mintOk({ name: 'to revoke' });
      expect((await me(body.token)).status).toBe(200);
      const res = await revokeOwn(body.id);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: body.id, state: 'revoked' });
      expect(res.body.revoked_at).not.toBeNull();
      expect(res.body.token).toBeUndefined();
      const after = await me(body.token);
      expect(after.status).toBe(401);
      expect(after.body.detail).toMatch(/revoked/);
      expect((await t.request('GET', '/api/plugins', { token: body.token })).status).toBe(401);
    });

    it('answers a second revoke with the same token and audits the revoke once', async () => {
      const body = await mintOk({ name: 'revoke twice' });
      const first = await revokeOwn(body.id);
      const second = await revokeOwn(body.id);
      expect(second.status).toBe(200);
      expect(second.body.revoked_at).toBe(first.body.revoked_at);
      const audit = await t.request('GET', `/api/audit?action=token.revoke&target=token:${body.id}`);
      expect(audit.body.items).toHaveLength(1);
    });

    it('lets a token revoke itself, and it is refused right after', async () => {
      const body = await mintOk({ name: 'self revoke' });
      const res = await revokeOwn(body.id, body.token);
      expect(res.status).toBe(200);
      expect((await me(body.token)).status).toBe(401);
    });

    it('answers 404 to revoking someone else\u2019s token through the owner path', async () => {
      const owner = await t.userToken('editor');
      const theirs = await mintOk({ name: 'not yours' }, owner.token);
      const intruder = await t.userToken('viewer');
      const res = await revokeOwn(theirs.id, intruder.token);
      expect(res.status).toBe(404);
      // Even a platform admin does not revoke others' tokens through the owner path.
      expect((await revokeOwn(theirs.id, t.adminToken)).status).toBe(404);
      expect((await me(theirs.token)).status).toBe(200);
      expect((await tokenRow(theirs.id)).revoked_at).toBeNull();
      expect((await revokeOwn(999_999, intruder.token)).status).toBe(404);
    });

    it('refuses a deactivated owner\u2019s token (401)', async () => {
      const owner = await t.userToken('viewer');
      const body = await mintOk({ name: 'owner leaves' }, owner.token);
      expect((await me(body.token)).status).toBe(200);
      const res = await t.request('DELETE', `/api/users/${owner.id}`);
      expect(res.status).toBe(200);
      const after = await me(body.token);
      expect(after.status).toBe(401);
      expect(after.body.detail).toMatch(/deactivated/);
    });
  });

  describe('org.admin governance', () => {
    let orgAdmin: { id: number; token: string };
    let member: { id: number; token: string };
    let memberToken: { id: number; token: string };
    let groupId: number;

    beforeAll(async () => {
      orgAdmin = await t.userToken('viewer', 'token-governor');
      member = await t.userToken('editor', 'token-member');
      const group = await t.request('POST', '/api/groups', { body: { name: 'token governors', capabilities: ['org.admin'] } });
      expect(group.status, group.text).toBe(201);
      groupId = group.body.id;
      const added = await t.request('POST', `/api/groups/${groupId}/members`, { body: { user_id: orgAdmin.id } });
      expect(added.status, added.text).toBe(201);
      memberToken = await mintOk({ name: 'member token' }, member.token);
    });

    it('lists every token of the organization\u2019s members, without secrets', async () => {
      const ownToken = await mintOk({ name: 'governor token' }, orgAdmin.token);
      const res = await t.request('GET', '/api/auth/tokens/admin', { token: orgAdmin.token });
      expect(res.status).toBe(200);
      const ids = res.body.map((x: { id: number }) => x.id).sort((a: number, b: number) => a - b);
      const expected = await t.kernel.storage.db
        .selectFrom('personal_access_tokens as p')
        .innerJoin('organization_members as m', 'm.user_id', 'p.user_id')
        .innerJoin('users as u', 'u.id', 'p.user_id')
        .select('p.id')
        .where('m.org_id', '=', 1)
        .where('u.default_org_id', '=', 1) // members whose home organization this is
        .where('u.role', '!=', 'admin') // platform admins' tokens are governed by platform admins only
        .orderBy('p.id')
        .execute();
      expect(ids).toEqual(expected.map((r) => r.id));
      expect(ids).toEqual(expect.arrayContaining([memberToken.id, ownToken.id]));
      // The platform admin sees them all, including their own.
      const all = await t.request('GET', '/api/auth/tokens/admin');
      const platformAdminTokens = await t.kernel.storage.db.selectFrom('personal_access_tokens').select('id').where('user_id', '=', 1).execute();
      expect(platformAdminTokens.length).toBeGreaterThan(0);
      expect(all.body.map((x: { id: number }) => x.id)).toEqual(expect.arrayContaining(platformAdminTokens.map((r) => r.id)));
      for (const { id } of platformAdminTokens) {
        expect(ids).not.toContain(id);
        expect((await t.request('DELETE', `/api/auth/tokens/admin/${id}`, { token: orgAdmin.token })).status).toBe(404);
      }
      const entry = res.body.find((x: { id: number }) => x.id === memberToken.id);
      expect(entry).toMatchObject({ user_id: member.id, username: 'token-member', name: 'member token' });
      for (const s of secrets) expect(res.text.includes(s.slice(10))).toBe(false);
    });

    it('refuses a plain member (403)', async () => {
      const viewer = await t.userToken('viewer');
      expect((await t.request('GET', '/api/auth/tokens/admin', { token: viewer.token })).status).toBe(403);
      expect((await t.request('DELETE', `/api/auth/tokens/admin/${memberToken.id}`, { token: viewer.token })).status).toBe(403);
      expect((await me(memberToken.token)).status).toBe(200);
    });

    it('keeps another organization\u2019s org.admin out of organization 1', async () => {
      const org = await t.request('POST', '/api/organizations', { body: { name: 'Elsewhere Inc' } });
      expect(org.status, org.text).toBe(201);
      const orgId: number = org.body.id;
      expect(orgId).not.toBe(1);
      const password = 'Outs1de-the-walls!';
      const created = await t.request('POST', '/api/users', { body: { username: 'outsider', email: 'outsider@example.test', role: 'viewer', password, default_org_id: orgId } });
      expect(created.status, created.text).toBe(201);
      const outsiderId: number = created.body.id;
      // Make the outsider org.admin of their own organization.
      const group = await t.request('POST', '/api/groups', { body: { name: 'elsewhere admins', capabilities: ['org.admin'] }, headers: { 'X-Org-Id': String(orgId) } });
      expect(group.status, group.text).toBe(201);
      const joined = await t.request('POST', `/api/groups/${group.body.id}/members`, { body: { user_id: outsiderId }, headers: { 'X-Org-Id': String(orgId) } });
      expect(joined.status, joined.text).toBe(201);
      const login = await t.request('POST', '/api/auth/login', { token: null, body: { username: 'outsider', password } });
      expect(login.status, login.text).toBe(200);
      const outsider: string = login.body.access_token;
      const outsiderPat = await mintOk({ name: 'outsider token' }, outsider);

      const list = await t.request('GET', '/api/auth/tokens/admin', { token: outsider });
      expect(list.status).toBe(200);
      const listedIds = list.body.map((x: { id: number }) => x.id);
      expect(listedIds).toContain(outsiderPat.id);
      expect(listedIds).not.toContain(memberToken.id);
      expect(list.body.every((x: { user_id: number }) => x.user_id !== member.id && x.user_id !== orgAdmin.id)).toBe(true);

      const revoke = await t.request('DELETE', `/api/auth/tokens/admin/${memberToken.id}`, { token: outsider });
      expect(revoke.status).toBe(404);
      expect((await me(memberToken.token)).status).toBe(200);
      expect((await tokenRow(memberToken.id)).revoked_at).toBeNull();

      // Naming organization 1 explicitly is refused: the outsider is not a member.
      expect((await t.request('GET', '/api/auth/tokens/admin', { token: outsider, headers: { 'X-Org-Id': '1' } })).status).toBe(403);
      expect((await t.request('DELETE', `/api/auth/tokens/admin/${memberToken.id}`, { token: outsider, headers: { 'X-Org-Id': '1' } })).status).toBe(403);
      expect((await me(memberToken.token)).status).toBe(200);

      // And organization 1's org.admin cannot reach the outsider's token.
      expect((await t.request('DELETE', `/api/auth/tokens/admin/${outsiderPat.id}`, { token: orgAdmin.token })).status).toBe(404);
      expect((await me(outsiderPat.token)).status).toBe(200);

      // The outsider cannot adopt organization 1's member (only a platform admin adds users of other
      // organizations), and even once one has, the outsider gets no hold on the member's tokens: an
      // organization governs the tokens of those whose home organization it is.
      const adopted = await t.request('POST', `/api/organizations/${orgId}/members`, { token: outsider, body: { user_id: member.id } });
      expect(adopted.status, adopted.text).toBe(404);
      expect((await t.request('POST', `/api/organizations/${orgId}/members`, { body: { user_id: member.id } })).status).toBe(201);
      expect((await t.request('GET', '/api/auth/tokens/admin', { token: outsider })).body.map((x: { id: number }) => x.id)).not.toContain(memberToken.id);
      expect((await t.request('DELETE', `/api/auth/tokens/admin/${memberToken.id}`, { token: outsider })).status).toBe(404);
      expect((await me(memberToken.token)).status).toBe(200);
    });

    it('revokes another member\u2019s token, which stops working at once', async () => {
      expect((await me(memberToken.token)).status).toBe(200);
      const res = await t.request('DELETE', `/api/auth/tokens/admin/${memberToken.id}`, { token: orgAdmin.token });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: memberToken.id, state: 'revoked' });
      revoked.push(memberToken.id);
      expect((await me(memberToken.token)).status).toBe(401);
      const row = await tokenRow(memberToken.id);
      expect(row.revoked_by).toBe(orgAdmin.id);
      const owned = await t.request('GET', '/api/auth/tokens', { token: member.token });
      expect(owned.body.find((x: { id: number }) => x.id === memberToken.id).state).toBe('revoked');
    });

    it('evaluates a scoped token against the owner\u2019s current capabilities on every request', async () => {
      const scoped = await mintOk({ name: 'governance only', scopes: ['org.admin'] }, orgAdmin.token);
      expect((await t.request('GET', '/api/auth/tokens/admin', { token: scoped.token })).status).toBe(200);
      // A scoped token never reaches beyond its scopes, even where the owner could.
      expect((await t.request('GET', '/api/plugins', { token: scoped.token })).status).toBe(403);
      const removed = await t.request('DELETE', `/api/groups/${groupId}/members/${orgAdmin.id}`);
      expect(removed.status, removed.text).toBe(204);
      expect((await t.request('GET', '/api/auth/tokens/admin', { token: scoped.token })).status).toBe(403);
      expect((await me(scoped.token)).body.capabilities).toEqual([]);
    });
  });

  describe('audit', () => {
    it('records mint and revoke, and never a secret', async () => {
      const res = await t.request('GET', '/api/audit?action=token.*&limit=500');
      expect(res.status).toBe(200);
      const rows = res.body.items as Array<{ action: string; outcome: string; target_type: string; target_id: string; actor_user_id: number }>;
      expect(rows.length).toBeGreaterThan(0);
      expect(rows.every((r) => r.action.startsWith('token.'))).toBe(true);
      const mints = new Set(rows.filter((r) => r.action === 'token.mint').map((r) => Number(r.target_id)));
      const revokes = new Set(rows.filter((r) => r.action === 'token.revoke').map((r) => Number(r.target_id)));
      for (const id of minted) expect(mints.has(id), `token.mint for ${id}`).toBe(true);
      expect(revoked.length).toBeGreaterThanOrEqual(3);
      for (const id of revoked) expect(revokes.has(id), `token.revoke for ${id}`).toBe(true);
      expect(rows.find((r) => r.action === 'token.mint' && Number(r.target_id) === minted[0])).toMatchObject({ target_type: 'token', actor_user_id: adminId, outcome: 'success' });

      const everything = JSON.stringify(await t.kernel.storage.db.selectFrom('audit_log').selectAll().execute());
      expect(secrets.length).toBeGreaterThan(5);
      for (const s of secrets) {
        expect(res.text.includes(s.slice(10)), 'secret in the audit answer').toBe(false);
        expect(everything.includes(s.slice(10)), 'secret in the audit table').toBe(false);
        expect(everything.includes(hmac(s))).toBe(false);
      }
    });
  });
});

describe.each(DIALECTS)('personal access token cap (%s)', (dialect) => {
  let t: TestKernel;
  beforeAll(async () => {
    t = await startTestKernel({ dialect, env: { PAT_MAX_PER_USER: '3' } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('refuses the 4th active token with a 409, and a revoke makes room', async () => {
    const user = await t.userToken('viewer');
    const ids: number[] = [];
    for (let i = 1; i <= 3; i += 1) {
      const res = await t.request('POST', '/api/auth/tokens', { token: user.token, body: { name: `cap ${i}` } });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.id);
    }
    const fourth = await t.request('POST', '/api/auth/tokens', { token: user.token, body: { name: 'cap 4' } });
    expect(fourth.status).toBe(409);
    expect(fourth.body.detail).toMatch(/3/);
    expect(fourth.body.token).toBeUndefined();
    const count = await t.kernel.storage.db.selectFrom('personal_access_tokens').select('id').where('user_id', '=', user.id).execute();
    expect(count).toHaveLength(3);

    // The cap is per user: someone else still mints.
    const other = await t.userToken('viewer');
    expect((await t.request('POST', '/api/auth/tokens', { token: other.token, body: { name: 'other' } })).status).toBe(201);

    expect((await t.request('DELETE', `/api/auth/tokens/${ids[0]}`, { token: user.token })).status).toBe(200);
    const again = await t.request('POST', '/api/auth/tokens', { token: user.token, body: { name: 'cap 4 again' } });
    expect(again.status, again.text).toBe(201);
    expect((await t.request('POST', '/api/auth/tokens', { token: user.token, body: { name: 'cap 5' } })).status).toBe(409);
  });

  it('holds under concurrent mints: exactly the cap passes', async () => {
    const user = await t.userToken('viewer');
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => t.request('POST', '/api/auth/tokens', { token: user.token, body: { name: `race ${i}` } })));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 201, 201, ...Array(9).fill(409)]);
    const rows = await t.kernel.storage.db.selectFrom('personal_access_tokens').select('id').where('user_id', '=', user.id).execute();
    expect(rows).toHaveLength(3);
  });
});

describe.each(DIALECTS)('personal access token rate limit (%s)', (dialect) => {
  let t: TestKernel;
  beforeAll(async () => {
    t = await startTestKernel({ dialect, env: { PAT_RATE_LIMIT_PER_MIN: '3' } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('answers 429 with Retry-After past the per-token budget, per token', async () => {
    const a = await t.request('POST', '/api/auth/tokens', { body: { name: 'limited a' } });
    const b = await t.request('POST', '/api/auth/tokens', { body: { name: 'limited b' } });
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    for (let i = 0; i < 3; i += 1) {
      const res = await t.request('GET', '/api/me', { token: a.body.token });
      expect(res.status, `request ${i + 1}`).toBe(200);
    }
    const limited = await t.request('GET', '/api/me', { token: a.body.token });
    expect(limited.status).toBe(429);
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);

    // Another token of the same owner has its own budget; JWTs are not limited by it.
    expect((await t.request('GET', '/api/me', { token: b.body.token })).status).toBe(200);
    expect((await t.request('GET', '/api/me')).status).toBe(200);
    expect((await t.request('GET', '/api/me', { token: a.body.token })).status).toBe(429);
  });
});
