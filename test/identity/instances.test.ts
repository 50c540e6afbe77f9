import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { startTestKernel, writeOutsideThePlatform, type TestKernel } from '../harness/index.ts';

/**
 * Two instances over one database, as behind a load balancer: each keeps an identity snapshot in
 * memory, so a change made through one must reach the other on its very next request (instances of
 * one process share its write clock; another process's changes are seen within 20 ms, below).
 */
describe.each(DIALECTS)('identity changes across instances (%s)', (dialect) => {
  let t: TestKernel;
  let other: Awaited<ReturnType<TestKernel['peer']>>;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    other = await t.peer();
  });
  afterAll(async () => t?.stop());

  it('a token revoked on one instance is refused by the other on its next request', async () => {
    const minted = await t.request('POST', '/api/auth/tokens', { body: { name: 'across' } });
    expect(minted.status, minted.text).toBe(201);
    expect((await other.request('GET', '/api/me', { token: minted.body.token })).status).toBe(200);
    expect((await t.request('DELETE', `/api/auth/tokens/${minted.body.id}`)).status).toBe(200);
    const refused = await other.request('GET', '/api/me', { token: minted.body.token });
    expect(refused.status).toBe(401);
    expect(refused.body.detail).toMatch(/revoked/);
  });

  it('a user deactivated on one instance is refused by the other on its next request', async () => {
    const user = await t.userToken('editor');
    expect((await other.request('GET', '/api/me', { token: user.token })).status).toBe(200);
    expect((await t.request('DELETE', `/api/users/${user.id}`)).status).toBe(200);
    const refused = await other.request('GET', '/api/me', { token: user.token });
    expect(refused.status).toBe(401);
    expect(refused.body.detail).toMatch(/deactivated/);
  });

  it('a group joined on one instance grants its capabilities on the other at once, and leaving takes them away', async () => {
    const user = await t.userToken('viewer');
    const before = await other.request('GET', '/api/me', { token: user.token });
    expect(before.body.capabilities).not.toContain('org.admin');
    const group = await t.request('POST', '/api/groups', { body: { name: 'across-admins', capabilities: ['org.admin'] } });
    expect(group.status, group.text).toBe(201);
    expect((await t.request('POST', `/api/groups/${group.body.id}/members`, { body: { user_id: user.id } })).status).toBe(201);
    const joined = await other.request('GET', '/api/me', { token: user.token });
    expect(joined.body.capabilities).toContain('org.admin');
    expect(joined.body.groups.map((g: { name: string }) => g.name)).toEqual(['across-admins']);
    expect((await t.request('DELETE', `/api/groups/${group.body.id}/members/${user.id}`)).status).toBe(204);
    const left = await other.request('GET', '/api/me', { token: user.token });
    expect(left.body.capabilities).not.toContain('org.admin');
    expect(left.body.groups).toEqual([]);
  });

  it('a membership removed on one instance closes the organization on the other', async () => {
    const user = await t.userToken('editor');
    const org = await t.request('POST', '/api/organizations', { body: { name: 'Across Ltd' } });
    expect((await t.request('POST', `/api/organizations/${org.body.id}/members`, { body: { user_id: user.id } })).status).toBe(201);
    const inside = await other.request('GET', '/api/me', { token: user.token, headers: { 'X-Org-Id': String(org.body.id) } });
    expect(inside.status).toBe(200);
    expect(inside.body.organizations.map((o: { id: number }) => o.id)).toContain(org.body.id);
    expect((await t.request('DELETE', `/api/organizations/${org.body.id}/members/${user.id}`)).status).toBe(204);
    const outside = await other.request('GET', '/api/me', { token: user.token, headers: { 'X-Org-Id': String(org.body.id) } });
    expect(outside.status).toBe(403);
  });

  it('an organization renamed straight in the database shows on the next request', async () => {
    const user = await t.userToken('viewer');
    expect((await other.request('GET', '/api/me', { token: user.token })).body.organizations[0].name).not.toBe('Renamed by console');
    await t.kernel.storage.db.updateTable('organizations').set({ name: 'Renamed by console' }).where('id', '=', 1).execute();
    const after = await other.request('GET', '/api/me', { token: user.token });
    expect(after.body.organizations.find((o: { id: number }) => o.id === 1).name).toBe('Renamed by console');
  });

  it('a user deactivated by another program writing to the database is refused moments later', async () => {
    const user = await t.userToken('editor');
    expect((await other.request('GET', '/api/me', { token: user.token })).status).toBe(200);
    await writeOutsideThePlatform(t.kernel.storage.description, 'update users set is_active = false where id = ' + Number(user.id));
    // A write by another process is noticed within OTHER_PROCESS_LAG_MS (20 ms), on both adapters.
    await new Promise((resolve) => setTimeout(resolve, 60));
    for (const instance of [t, other]) {
      const refused = await instance.request('GET', '/api/me', { token: user.token });
      expect(refused.status).toBe(401);
      expect(refused.body.detail).toMatch(/deactivated/);
    }
  });
});
