import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { startTestKernel, type TestKernel } from '../harness/index.ts';
import type { MountedRoute } from '../../kernel/registry/generation.ts';

/**
 * Tenancy (issue 3, "Tenancy"): a member of organization B — even B's org admin — never sees or
 * changes organization A's data. The sweep walks every org-scoped route the registry serves, so
 * a route added later is covered without touching this file.
 */
describe.each(DIALECTS)('tenancy (%s)', (dialect) => {
  let t: TestKernel;
  const tag = crypto.randomBytes(4).toString('hex');
  // Strings that only ever belong to organization A: none may show up in an answer to B.
  const markers = { group: `alpha-group-${tag}`, token: `alpha-pat-${tag}`, user: `alpha-admin-${tag}` };

  const orgA = 1;
  let orgB: number;
  let adminId: number;
  let aAdmin: { id: number; token: string };
  let bAdmin: { id: number; token: string };
  let groupA: number;
  let groupB: number;
  let tokenA: number;
  let tokenB: number;
  let orgScoped: MountedRoute[];

  const asB = (orgId: number | string) => ({ token: bAdmin.token, headers: { 'X-Org-Id': String(orgId) } });

  async function createUser(username: string, defaultOrgId: number) {
    const res = await t.request('POST', '/api/users', { body: { username, email: `${username}@example.test`, role: 'viewer', default_org_id: defaultOrgId } });
    expect(res.status, res.text).toBe(201);
    return { id: res.body.id as number, token: await t.kernel.issueToken({ id: res.body.id, role: 'viewer' }) };
  }

  async function createGroup(orgId: number, name: string, capabilities: string[], member: number) {
    const created = await t.request('POST', '/api/groups', { headers: { 'X-Org-Id': String(orgId) }, body: { name, capabilities } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.org_id).toBe(orgId);
    const added = await t.request('POST', `/api/groups/${created.body.id}/members`, { headers: { 'X-Org-Id': String(orgId) }, body: { user_id: member } });
    expect(added.status, added.text).toBe(201);
    return created.body.id as number;
  }

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    adminId = (await t.request('GET', '/api/me')).body.user.id;

    const b = await t.request('POST', '/api/organizations', { body: { name: `beta-${tag}` } });
    expect(b.status, b.text).toBe(201);
    orgB = b.body.id;
    expect(orgB).not.toBe(orgA);

    // Organization A: its admin (org.admin through a group), a group, a token, audit events.
    aAdmin = await createUser(markers.user, orgA);
    groupA = await createGroup(orgA, markers.group, ['org.admin'], aAdmin.id);
    const patA = await t.request('POST', '/api/auth/tokens', { token: aAdmin.token, body: { name: markers.token } });
    expect(patA.status, patA.text).toBe(201);
    tokenA = patA.body.id;

    // Organization B: its admin, holding every capability there is (in B only), and a token of its own.
    const scopes = await t.request('GET', '/api/auth/scopes');
    const everything = scopes.body.map((c: { name: string }) => c.name);
    expect(everything).toContain('org.admin');
    bAdmin = await createUser(`beta-admin-${tag}`, orgB);
    groupB = await createGroup(orgB, `beta-admins-${tag}`, everything, bAdmin.id);
    const patB = await t.request('POST', '/api/auth/tokens', { token: bAdmin.token, body: { name: `beta-pat-${tag}` } });
    expect(patB.status, patB.text).toBe(201);
    tokenB = patB.body.id;

    // The platform admin created B and so joined it; leave, so entering B is cross-organization.
    const left = await t.request('DELETE', `/api/organizations/${orgB}/members/${adminId}`);
    expect(left.status, left.text).toBe(204);

    orgScoped = t.kernel.registry.current.routes.filter((m) => m.route.orgScoped === true);
  });
  afterAll(async () => {
    await t?.stop();
  });

  /** A's resource a path parameter of this route names, when this suite created one. */
  function resourceOfA(m: MountedRoute, name: string): number | undefined {
    if (name === 'user_id') return aAdmin.id;
    if (name === 'id' && m.path.startsWith('/api/groups/')) return groupA;
    if (name === 'id' && m.path.startsWith('/api/auth/tokens/admin/')) return tokenA;
    return undefined;
  }

  /** A concrete path for a mounted route, its parameters filled with A's resources (else 1). */
  function pathFor(m: MountedRoute): string {
    return m.path.replace(/\{([^}]+)\}/g, (_, name: string) => String(resourceOfA(m, name) ?? 1));
  }

  /** True when the route's first path parameter names one of A's resources. */
  const namesResourceOfA = (m: MountedRoute) => {
    const first = /\{([^}]+)\}/.exec(m.path);
    return !!first && resourceOfA(m, first[1]) !== undefined;
  };

  /** A body the route would accept, so a refusal is about the organization and nothing else. */
  function bodyFor(m: MountedRoute): unknown {
    if (!m.route.request?.body) return undefined;
    const key = `${m.route.method.toUpperCase()} ${m.path}`;
    const bodies: Record<string, unknown> = {
      'POST /api/groups': { name: `sweep-${tag}`, capabilities: ['groups.read'] },
      'PATCH /api/groups/{id}': { name: `renamed-${tag}`, capabilities: ['org.admin', 'groups.read'] },
      'POST /api/groups/{id}/members': { user_id: bAdmin.id },
    };
    return bodies[key] ?? {};
  }

  /** Everything A owns, read straight from the database: the sweep must leave it untouched. */
  async function snapshotA() {
    const db = t.kernel.storage.db;
    const groups = await db.selectFrom('groups').select(['id', 'name']).where('org_id', '=', orgA).orderBy('id').execute();
    const caps = await db.selectFrom('group_capabilities').select(['group_id', 'capability']).where('group_id', '=', groupA).orderBy('capability').execute();
    const members = await db.selectFrom('group_members').select(['group_id', 'user_id']).where('group_id', '=', groupA).orderBy('user_id').execute();
    const token = await db.selectFrom('personal_access_tokens').select(['id', 'revoked_at']).where('id', '=', tokenA).executeTakeFirstOrThrow();
    const orgMembers = await db.selectFrom('organization_members').select('user_id').where('org_id', '=', orgA).orderBy('user_id').execute();
    return { groups, caps, members, token, orgMembers };
  }

  it('the registry marks the groups, audit and token-governance routes org-scoped (the sweep is not vacuous)', () => {
    const keys = orgScoped.map((m) => `${m.route.method.toUpperCase()} ${m.path}`);
    expect(keys).toEqual(
      expect.arrayContaining([
        'GET /api/groups',
        'POST /api/groups',
        'GET /api/groups/{id}',
        'PATCH /api/groups/{id}',
        'DELETE /api/groups/{id}',
        'GET /api/groups/{id}/members',
        'POST /api/groups/{id}/members',
        'DELETE /api/groups/{id}/members/{user_id}',
        'GET /api/audit',
        'GET /api/auth/tokens/admin',
        'DELETE /api/auth/tokens/admin/{id}',
      ]),
    );
  });

  it('every org-scoped route refuses B\u2019s org admin in organization A with 403, and A is left untouched', async () => {
    const before = await snapshotA();
    expect(before.groups.map((g) => g.id)).toContain(groupA);
    expect(before.token.revoked_at).toBeNull();
    const answers: string[] = [];
    for (const m of orgScoped) {
      const res = await t.request(m.route.method.toUpperCase(), pathFor(m), { ...asB(orgA), body: bodyFor(m) });
      answers.push(`${m.route.method.toUpperCase()} ${pathFor(m)} -> ${res.status}`);
      expect(res.status, `${m.route.method.toUpperCase()} ${pathFor(m)}: ${res.text}`).toBe(403);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      for (const marker of Object.values(markers)) expect(res.text).not.toContain(marker);
    }
    expect(answers.length).toBe(orgScoped.length);
    expect(await snapshotA()).toEqual(before);
  });

  it('every org-scoped route answers 400 to a non-integer X-Org-Id', async () => {
    for (const m of orgScoped) {
      const res = await t.request(m.route.method.toUpperCase(), pathFor(m), { ...asB('abc'), body: bodyFor(m) });
      expect(res.status, `${m.route.method.toUpperCase()} ${pathFor(m)}: ${res.text}`).toBe(400);
      expect(res.body.detail).toMatch(/X-Org-Id/);
    }
  });

  it('every org-scoped route, called in B with A\u2019s ids, shows nothing of A and changes nothing of A', async () => {
    const before = await snapshotA();
    expect(orgScoped.filter(namesResourceOfA).length).toBeGreaterThanOrEqual(7);
    for (const m of orgScoped) {
      const res = await t.request(m.route.method.toUpperCase(), pathFor(m), { ...asB(orgB), body: bodyFor(m) });
      const label = `${m.route.method.toUpperCase()} ${pathFor(m)}: ${res.status} ${res.text}`;
      // A route that names one of A's resources must not find it; any other may answer, with B's data only.
      if (namesResourceOfA(m)) expect(res.status, label).toBe(404);
      else expect(res.status, label).toBeLessThan(500);
      for (const marker of Object.values(markers)) expect(res.text, label).not.toContain(marker);
    }
    expect(await snapshotA()).toEqual(before);
  });

  it('B\u2019s org admin in B sees B\u2019s groups only and cannot read, change or delete A\u2019s group', async () => {
    const list = await t.request('GET', '/api/groups', asB(orgB));
    expect(list.status).toBe(200);
    const ids = list.body.map((g: { id: number }) => g.id);
    expect(ids).toContain(groupB);
    expect(ids).not.toContain(groupA);
    expect(list.body.every((g: { org_id: number }) => g.org_id === orgB)).toBe(true);
    // Without the header the default organization (B) applies: same answer.
    const byDefault = await t.request('GET', '/api/groups', { token: bAdmin.token });
    expect(byDefault.body.map((g: { id: number }) => g.id)).toEqual(ids);

    expect((await t.request('GET', `/api/groups/${groupA}`, asB(orgB))).status).toBe(404);
    expect((await t.request('GET', `/api/groups/${groupA}/members`, asB(orgB))).status).toBe(404);
    expect((await t.request('PATCH', `/api/groups/${groupA}`, { ...asB(orgB), body: { capabilities: [] } })).status).toBe(404);
    expect((await t.request('DELETE', `/api/groups/${groupA}`, asB(orgB))).status).toBe(404);
    expect((await t.request('DELETE', `/api/groups/${groupA}/members/${aAdmin.id}`, asB(orgB))).status).toBe(404);

    const still = await t.request('GET', `/api/groups/${groupA}`, { headers: { 'X-Org-Id': String(orgA) } });
    expect(still.status).toBe(200);
    expect(still.body).toMatchObject({ id: groupA, org_id: orgA, name: markers.group, capabilities: ['org.admin'] });
  });

  it('B\u2019s org admin lists and revokes B\u2019s tokens only', async () => {
    const list = await t.request('GET', '/api/auth/tokens/admin', asB(orgB));
    expect(list.status).toBe(200);
    const ids = list.body.map((x: { id: number }) => x.id);
    expect(ids).toContain(tokenB);
    expect(ids).not.toContain(tokenA);
    expect(list.body.some((x: { user_id: number }) => x.user_id === aAdmin.id)).toBe(false);

    const revoke = await t.request('DELETE', `/api/auth/tokens/admin/${tokenA}`, asB(orgB));
    expect(revoke.status).toBe(404);
    const mine = await t.request('GET', '/api/auth/tokens', { token: aAdmin.token });
    expect(mine.body.find((x: { id: number }) => x.id === tokenA)).toMatchObject({ state: 'active', revoked_at: null });
  });

  it('B\u2019s org admin never sees A\u2019s audit events, whatever the filters', async () => {
    // A's log has events (the group, its member, the token): make sure there is something to hide.
    const aLog = await t.request('GET', '/api/audit', { token: aAdmin.token });
    expect(aLog.status).toBe(200);
    expect(aLog.body.items.map((e: { action: string }) => e.action)).toEqual(expect.arrayContaining(['group.create', 'group.member.add', 'token.mint']));

    for (const query of ['', `?org_id=${orgA}`, `?target=group:${groupA}`, `?actor=${aAdmin.id}`, '?action=token.*']) {
      const res = await t.request('GET', `/api/audit${query}`, asB(orgB));
      expect(res.status, query).toBe(200);
      for (const e of res.body.items) {
        expect(e.org_id, query).toBe(orgB);
        expect(`${e.target_type}:${e.target_id}`).not.toBe(`group:${groupA}`);
      }
      for (const marker of Object.values(markers)) expect(res.text).not.toContain(marker);
    }
    // B's own log is not empty: its group and its token are in it.
    const own = await t.request('GET', '/api/audit', asB(orgB));
    expect(own.body.items.map((e: { target_id: string }) => e.target_id)).toEqual(expect.arrayContaining([String(groupB), String(tokenB)]));
  });

  it('a user of A cannot be added to a group of B (422)', async () => {
    const res = await t.request('POST', `/api/groups/${groupB}/members`, { ...asB(orgB), body: { user_id: aAdmin.id } });
    expect(res.status, res.text).toBe(422);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const members = await t.request('GET', `/api/groups/${groupB}/members`, asB(orgB));
    expect(members.body.map((m: { user_id: number }) => m.user_id)).toEqual([bAdmin.id]);
  });

  it('a platform admin may enter an organization they do not belong to, and that is audited', async () => {
    const db = t.kernel.storage.db;
    expect(await db.selectFrom('organization_members').select('user_id').where('org_id', '=', orgB).where('user_id', '=', adminId).executeTakeFirst()).toBeUndefined();
    const count = async () =>
      Number((await db.selectFrom('audit_log').select((eb) => eb.fn.countAll().as('n')).where('action', '=', 'tenancy.cross_org_access').executeTakeFirstOrThrow()).n);
    const before = await count();

    const res = await t.request('GET', '/api/groups', { headers: { 'X-Org-Id': String(orgB) } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.map((g: { id: number }) => g.id)).toContain(groupB);
    expect(await count()).toBe(before + 1);
    // Every entry is audited, not only the first (a resolved caller is never kept for it).
    expect((await t.request('GET', '/api/groups', { headers: { 'X-Org-Id': String(orgB) } })).status).toBe(200);
    expect(await count()).toBe(before + 2);

    const audit = await t.request('GET', `/api/audit?action=tenancy.cross_org_access&org_id=${orgB}`);
    expect(audit.status).toBe(200);
    expect(audit.body.items[0]).toMatchObject({ action: 'tenancy.cross_org_access', actor_user_id: adminId, actor_username: 'admin', target_type: 'organization', target_id: String(orgB), org_id: orgB });

    // Entering one's own organization is not cross-organization access.
    await t.request('GET', '/api/groups', { headers: { 'X-Org-Id': String(orgA) } });
    expect(await count()).toBe(before + 2);

    // A platform admin naming an organization that does not exist is refused like anyone else.
    expect((await t.request('GET', '/api/groups', { headers: { 'X-Org-Id': '999999' } })).status).toBe(403);
  });
});
