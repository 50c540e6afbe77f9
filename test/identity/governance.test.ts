import crypto from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { startTestKernel, type TestKernel } from '../harness/index.ts';

/**
 * Governance (issue 3): the users, organizations, groups and audit routers, and how capabilities
 * granted through groups take effect per organization and per request.
 */
describe.each(DIALECTS)('governance (%s)', (dialect) => {
  let t: TestKernel;
  let adminId: number;
  const tag = crypto.randomBytes(3).toString('hex');
  let seq = 0;
  const uniq = (prefix: string) => `${prefix}-${tag}-${++seq}`;

  const fieldPaths = (body: { errors?: { path: string }[] }) => (body.errors ?? []).map((e) => e.path);

  async function newOrganization(name = uniq('org')) {
    const res = await t.request('POST', '/api/organizations', { body: { name } });
    expect(res.status, res.text).toBe(201);
    return res.body.id as number;
  }

  /** A viewer created through the API, with a JWT; member of `orgId` (its default). */
  async function newUser(orgId = 1, role = 'viewer') {
    const username = uniq('user');
    const res = await t.request('POST', '/api/users', { body: { username, email: `${username}@example.test`, role, default_org_id: orgId } });
    expect(res.status, res.text).toBe(201);
    return { id: res.body.id as number, username, token: await t.kernel.issueToken({ id: res.body.id, role }) };
  }

  async function newGroup(orgId: number, capabilities: string[], name = uniq('group')) {
    const res = await t.request('POST', '/api/groups', { headers: { 'X-Org-Id': String(orgId) }, body: { name, capabilities } });
    expect(res.status, res.text).toBe(201);
    return res.body.id as number;
  }

  async function addToGroup(orgId: number, groupId: number, userId: number) {
    const res = await t.request('POST', `/api/groups/${groupId}/members`, { headers: { 'X-Org-Id': String(orgId) }, body: { user_id: userId } });
    expect(res.status, res.text).toBe(201);
  }

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    adminId = (await t.request('GET', '/api/me')).body.user.id;
  });
  afterAll(async () => {
    await t?.stop();
  });

  describe('users router', () => {
    it('creates, lists with paging, reads, updates and deactivates users', async () => {
      const username = uniq('alice');
      const created = await t.request('POST', '/api/users', { body: { username, email: `${username.toUpperCase()}@Example.test`, role: 'editor', default_org_id: 1 } });
      expect(created.status, created.text).toBe(201);
      expect(created.body).toMatchObject({ username, email: `${username}@example.test`, role: 'editor', default_org_id: 1, must_reset_password: true, is_active: true });
      expect(created.body.user_id).toBe(created.body.id);
      expect(created.text).not.toMatch(/password_hash|scrypt/);
      const id = created.body.id as number;

      // Paging: compare with the table itself.
      for (let i = 0; i < 3; i += 1) await newUser();
      const all = await t.kernel.storage.db.selectFrom('users').select('id').orderBy('id').execute();
      const page = await t.request('GET', '/api/users?limit=2&offset=1');
      expect(page.status).toBe(200);
      expect(page.body).toMatchObject({ total: all.length, limit: 2, offset: 1 });
      expect(page.body.items.map((u: { id: number }) => u.id)).toEqual(all.slice(1, 3).map((u) => u.id));
      const tail = await t.request('GET', `/api/users?limit=50&offset=${all.length - 1}`);
      expect(tail.body.items.map((u: { id: number }) => u.id)).toEqual([all[all.length - 1].id]);
      const defaults = await t.request('GET', '/api/users');
      expect(defaults.body).toMatchObject({ limit: 50, offset: 0, total: all.length });

      const one = await t.request('GET', `/api/users/${id}`);
      expect(one.status).toBe(200);
      expect(one.body).toEqual(created.body);

      const orgB = await newOrganization();
      const patched = await t.request('PATCH', `/api/users/${id}`, { body: { role: 'management', email: `${username}-2@example.test`, default_org_id: orgB } });
      expect(patched.status, patched.text).toBe(200);
      expect(patched.body).toMatchObject({ id, role: 'management', email: `${username}-2@example.test`, default_org_id: orgB });
      expect((await t.request('GET', `/api/users/${id}`)).body).toMatchObject({ role: 'management', email: `${username}-2@example.test`, default_org_id: orgB });
      // The new default organization is one the user belongs to.
      const members = await t.request('GET', `/api/organizations/${orgB}/members`);
      expect(members.body.map((m: { user_id: number }) => m.user_id)).toContain(id);

      const token = await t.kernel.issueToken({ id, role: 'management' });
      expect((await t.request('GET', '/api/me', { token })).status).toBe(200);
      const deleted = await t.request('DELETE', `/api/users/${id}`);
      expect(deleted.status, deleted.text).toBe(200);
      expect(deleted.body).toMatchObject({ id, is_active: false });
      expect((await t.request('GET', `/api/users/${id}`)).body.is_active).toBe(false);
      // Deactivation takes effect on the very next request.
      expect((await t.request('GET', '/api/me', { token })).status).toBe(401);
    });

    it('refuses a viewer on every users route (403)', async () => {
      const viewer = await newUser();
      const target = await newUser();
      const calls: [string, string, unknown?][] = [
        ['POST', '/api/users', { username: uniq('x'), email: `${uniq('x')}@example.test`, role: 'viewer' }],
        ['GET', '/api/users'],
        ['GET', `/api/users/${target.id}`],
        ['PATCH', `/api/users/${target.id}`, { role: 'admin' }],
        ['DELETE', `/api/users/${target.id}`],
        ['POST', `/api/users/${target.id}/reset-password`],
      ];
      for (const [method, path, body] of calls) {
        const res = await t.request(method, path, { token: viewer.token, body });
        expect(res.status, `${method} ${path}`).toBe(403);
        expect(res.body.detail).toMatch(/users\.manage/);
      }
      expect((await t.request('GET', `/api/users/${target.id}`)).body).toMatchObject({ role: 'viewer', is_active: true });
    });

    it('answers 400 naming the field for a bad e-mail or an unknown role, and 404 for an unknown user', async () => {
      const badEmail = await t.request('POST', '/api/users', { body: { username: uniq('bob'), email: 'not-an-email', role: 'viewer' } });
      expect(badEmail.status).toBe(400);
      expect(fieldPaths(badEmail.body)).toEqual(['body.email']);
      expect(badEmail.body.detail).toMatch(/body\.email/);

      const badRole = await t.request('POST', '/api/users', { body: { username: uniq('bob'), email: `${uniq('bob')}@example.test`, role: 'superuser' } });
      expect(badRole.status).toBe(400);
      expect(fieldPaths(badRole.body)).toEqual(['body.role']);

      const victim = await newUser();
      const badPatch = await t.request('PATCH', `/api/users/${victim.id}`, { body: { email: 'nope', role: 'root' } });
      expect(badPatch.status).toBe(400);
      expect(fieldPaths(badPatch.body).sort()).toEqual(['body.email', 'body.role']);

      for (const [method, body] of [['GET'], ['PATCH', { role: 'editor' }], ['DELETE'], ['POST']] as [string, unknown?][]) {
        const path = method === 'POST' ? '/api/users/987654/reset-password' : '/api/users/987654';
        const res = await t.request(method, path, { body });
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      }
    });
  });

  describe('organizations router', () => {
    it('platform admins create organizations; a viewer may not', async () => {
      const name = uniq('acme');
      const res = await t.request('POST', '/api/organizations', { body: { name } });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ id: expect.any(Number), name });
      const viewer = await newUser();
      const refused = await t.request('POST', '/api/organizations', { token: viewer.token, body: { name: uniq('nope') } });
      expect(refused.status).toBe(403);
      const count = await t.kernel.storage.db.selectFrom('organizations').select('id').where('name', 'like', 'nope-%').execute();
      expect(count).toEqual([]);
    });

    it('lists only the caller\u2019s organizations and hides the others (404)', async () => {
      const other = await newOrganization();
      const viewer = await newUser(1);
      const list = await t.request('GET', '/api/organizations', { token: viewer.token });
      expect(list.status).toBe(200);
      expect(list.body.map((o: { id: number }) => o.id)).toEqual([1]);
      expect((await t.request('GET', '/api/organizations/1', { token: viewer.token })).body).toMatchObject({ id: 1 });
      expect((await t.request('GET', `/api/organizations/${other}`, { token: viewer.token })).status).toBe(404);
      expect((await t.request('GET', `/api/organizations/${other}/members`, { token: viewer.token })).status).toBe(404);

      // Once a member, the organization shows.
      expect((await t.request('POST', `/api/organizations/${other}/members`, { body: { user_id: viewer.id } })).status).toBe(201);
      const after = await t.request('GET', '/api/organizations', { token: viewer.token });
      expect(after.body.map((o: { id: number }) => o.id)).toEqual([1, other]);
      expect((await t.request('GET', `/api/organizations/${other}`, { token: viewer.token })).status).toBe(200);
    });

    it('members are managed by org.admin of that organization only; duplicates are 409', async () => {
      const org = await newOrganization();
      const orgAdmin = await newUser(org);
      await addToGroup(org, await newGroup(org, ['org.admin']), orgAdmin.id);
      // The org admin of `org` is a plain member of organization 1.
      expect((await t.request('POST', '/api/organizations/1/members', { body: { user_id: orgAdmin.id } })).status).toBe(201);
      // A user whose home organization is `org`, not (or no longer) a member of it.
      const newcomer = await newUser(org);
      expect((await t.request('DELETE', `/api/organizations/${org}/members/${newcomer.id}`)).status).toBe(204);
      const plainMember = await newUser(org);

      const add = await t.request('POST', `/api/organizations/${org}/members`, { token: orgAdmin.token, body: { user_id: newcomer.id } });
      expect(add.status, add.text).toBe(201);
      expect(add.body).toEqual({ org_id: org, user_id: newcomer.id });
      const list = await t.request('GET', `/api/organizations/${org}/members`, { token: orgAdmin.token });
      expect(list.status).toBe(200);
      expect(list.body.map((m: { user_id: number }) => m.user_id).sort((a: number, b: number) => a - b)).toEqual([adminId, orgAdmin.id, newcomer.id, plainMember.id].sort((a, b) => a - b));

      const duplicate = await t.request('POST', `/api/organizations/${org}/members`, { token: orgAdmin.token, body: { user_id: newcomer.id } });
      expect(duplicate.status).toBe(409);

      // Without org.admin in that organization: 403, whether plain member here or admin elsewhere.
      const third = await newUser(1);
      expect((await t.request('POST', `/api/organizations/${org}/members`, { token: plainMember.token, body: { user_id: third.id } })).status).toBe(403);
      expect((await t.request('DELETE', `/api/organizations/${org}/members/${newcomer.id}`, { token: plainMember.token })).status).toBe(403);
      expect((await t.request('POST', '/api/organizations/1/members', { token: orgAdmin.token, body: { user_id: plainMember.id } })).status).toBe(403);
      expect((await t.request('DELETE', `/api/organizations/1/members/${newcomer.id}`, { token: orgAdmin.token })).status).toBe(403);
      expect((await t.request('POST', '/api/organizations/1/members', { token: orgAdmin.token, headers: { 'X-Org-Id': '1' }, body: { user_id: plainMember.id } })).status).toBe(403);

      const remove = await t.request('DELETE', `/api/organizations/${org}/members/${newcomer.id}`, { token: orgAdmin.token });
      expect(remove.status, remove.text).toBe(204);
      const again = await t.request('GET', `/api/organizations/${org}/members`, { token: orgAdmin.token });
      expect(again.body.map((m: { user_id: number }) => m.user_id)).not.toContain(newcomer.id);
      expect((await t.request('DELETE', `/api/organizations/${org}/members/${newcomer.id}`, { token: orgAdmin.token })).status).toBe(404);
      // Organization 1 is unchanged by the refused calls.
      const one = await t.request('GET', '/api/organizations/1/members');
      const ids = one.body.map((m: { user_id: number }) => m.user_id);
      expect(ids).toContain(orgAdmin.id);
      expect(ids).not.toContain(plainMember.id);
      expect(ids).not.toContain(newcomer.id);
    });

    it('an org admin adds only users whose home organization it is, refusing others exactly as ids that do not exist; a platform admin adds anyone', async () => {
      const org = await newOrganization();
      const orgAdmin = await newUser(org);
      await addToGroup(org, await newGroup(org, ['org.admin']), orgAdmin.id);
      const elsewhere = await newOrganization();
      const foreign = await newUser(elsewhere);
      const ofOrgOne = await newUser(1);
      const missing = (await t.kernel.storage.db.selectFrom('users').select(t.kernel.storage.db.fn.max('id').as('id')).executeTakeFirstOrThrow()).id as number + 1000;
      const members = async () => (await t.request('GET', `/api/organizations/${org}/members`)).body.map((m: { user_id: number }) => m.user_id);
      const before = await members();

      /** The answer with what may differ taken out: the request id, and the id asked for. */
      const refusal = async (userId: number) => {
        const res = await t.request('POST', `/api/organizations/${org}/members`, { token: orgAdmin.token, body: { user_id: userId } });
        const { request_id: _requestId, ...body } = res.body;
        return { status: res.status, type: res.headers.get('content-type'), body: JSON.parse(JSON.stringify(body).replaceAll(String(userId), '<id>')) };
      };
      const answers = await Promise.all([foreign.id, ofOrgOne.id, adminId, missing].map(refusal));
      expect(answers[0].status).toBe(404);
      for (const answer of answers) expect(answer).toEqual(answers[0]);
      expect(await members()).toEqual(before);
      const audit = await t.request('GET', `/api/audit?action=organization.member.add&target=user:${foreign.id}`);
      expect(audit.body.items).toEqual([]);

      // A platform admin keeps adding users of any organization (and gets the plain 404 for none).
      expect((await t.request('POST', `/api/organizations/${org}/members`, { body: { user_id: foreign.id } })).status).toBe(201);
      expect(await members()).toContain(foreign.id);
      const none = await t.request('POST', `/api/organizations/${org}/members`, { body: { user_id: missing } });
      expect(none.status).toBe(404);
      // Once a member, the org admin may remove them again (membership is theirs to govern).
      expect((await t.request('DELETE', `/api/organizations/${org}/members/${foreign.id}`, { token: orgAdmin.token })).status).toBe(204);
    });
  });

  describe('groups and capabilities', () => {
    it('refuses an unknown capability, naming it', async () => {
      const name = uniq('bad');
      const res = await t.request('POST', '/api/groups', { body: { name, capabilities: ['groups.read', 'no.such.capability'] } });
      expect(res.status).toBe(400);
      expect(res.body.detail).toContain('no.such.capability');
      expect(res.body.errors).toEqual([{ path: 'body.capabilities.1', message: expect.stringContaining('no.such.capability') }]);
      expect((await t.request('GET', '/api/groups')).body.map((g: { name: string }) => g.name)).not.toContain(name);

      const group = await newGroup(1, []);
      const patch = await t.request('PATCH', `/api/groups/${group}`, { body: { capabilities: ['made.up'] } });
      expect(patch.status).toBe(400);
      expect(patch.body.detail).toContain('made.up');
    });

    it('refuses platform-wide capabilities in a group, and a stored one grants nothing', async () => {
      for (const capability of ['users.manage', 'plugins.manage', 'organizations.create']) {
        const created = await t.request('POST', '/api/groups', { body: { name: `escalate ${capability}`, capabilities: ['groups.read', capability] } });
        expect(created.status, capability).toBe(400);
        expect(created.body.detail).toContain(capability);
        expect(created.body.errors[0].path).toBe('body.capabilities.1');
      }
      const group = await newGroup(1, ['groups.read']);
      const patch = await t.request('PATCH', `/api/groups/${group}`, { body: { capabilities: ['users.manage'] } });
      expect(patch.status).toBe(400);
      expect((await t.request('GET', `/api/groups/${group}`)).body.capabilities).toEqual(['groups.read']);

      // An org admin of another organization cannot reach every tenant's users through a group.
      const orgB = await newOrganization();
      const viewer = await newUser(1);
      expect((await t.request('POST', `/api/organizations/${orgB}/members`, { body: { user_id: viewer.id } })).status).toBe(201);
      const admins = await newGroup(orgB, ['org.admin']);
      await addToGroup(orgB, admins, viewer.id);
      const asOrgAdmin = { token: viewer.token, headers: { 'X-Org-Id': String(orgB) } };
      expect((await t.request('POST', '/api/groups', { ...asOrgAdmin, body: { name: 'mine', capabilities: ['users.manage'] } })).status).toBe(400);
      // A row written before this rule (or by hand) grants nothing either.
      const legacy = await newGroup(orgB, []);
      await addToGroup(orgB, legacy, viewer.id);
      await t.kernel.storage.db.insertInto('group_capabilities').values({ group_id: legacy, capability: 'users.manage' }).execute();
      expect((await t.request('GET', '/api/users', asOrgAdmin)).status).toBe(403);
      expect((await t.request('GET', '/api/me', asOrgAdmin)).body.capabilities).not.toContain('users.manage');
    });

    it('a capability granted through a group applies, and stops on the very next request once removed', async () => {
      const viewer = await newUser(1);
      expect((await t.request('GET', '/api/audit', { token: viewer.token })).status).toBe(403);
      const group = await newGroup(1, ['org.admin']);
      await addToGroup(1, group, viewer.id);
      expect((await t.request('GET', '/api/audit', { token: viewer.token })).status).toBe(200);

      const me = await t.request('GET', '/api/me', { token: viewer.token });
      expect(me.status).toBe(200);
      expect(me.body.capabilities).toContain('org.admin');
      expect(me.body.groups.map((g: { id: number }) => g.id)).toEqual([group]);
      expect(me.body.groups[0]).toMatchObject({ id: group, org_id: 1, capabilities: ['org.admin'] });
      expect(me.body.current_org_id).toBe(1);

      const removed = await t.request('DELETE', `/api/groups/${group}/members/${viewer.id}`);
      expect(removed.status).toBe(204);
      expect((await t.request('GET', '/api/audit', { token: viewer.token })).status).toBe(403);
      const after = await t.request('GET', '/api/me', { token: viewer.token });
      expect(after.body.capabilities).not.toContain('org.admin');
      expect(after.body.groups).toEqual([]);
    });

    it('changing a group\u2019s capabilities takes effect on the next request', async () => {
      const viewer = await newUser(1);
      const group = await newGroup(1, ['groups.read']);
      await addToGroup(1, group, viewer.id);
      expect((await t.request('GET', '/api/audit', { token: viewer.token })).status).toBe(403);
      const patch = await t.request('PATCH', `/api/groups/${group}`, { body: { capabilities: ['org.admin'] } });
      expect(patch.status, patch.text).toBe(200);
      expect(patch.body.capabilities).toEqual(['org.admin']);
      expect((await t.request('GET', '/api/audit', { token: viewer.token })).status).toBe(200);
      expect((await t.request('PATCH', `/api/groups/${group}`, { body: { capabilities: [] } })).status).toBe(200);
      expect((await t.request('GET', '/api/audit', { token: viewer.token })).status).toBe(403);
    });

    it('capabilities are per organization: a group in B grants nothing in A', async () => {
      const orgB = await newOrganization();
      const viewer = await newUser(1);
      expect((await t.request('POST', `/api/organizations/${orgB}/members`, { body: { user_id: viewer.id } })).status).toBe(201);
      const groupB = await newGroup(orgB, ['org.admin']);
      await addToGroup(orgB, groupB, viewer.id);

      expect((await t.request('GET', '/api/audit', { token: viewer.token, headers: { 'X-Org-Id': String(orgB) } })).status).toBe(200);
      expect((await t.request('GET', '/api/audit', { token: viewer.token, headers: { 'X-Org-Id': '1' } })).status).toBe(403);
      expect((await t.request('GET', '/api/audit', { token: viewer.token })).status).toBe(403);

      const inB = await t.request('GET', '/api/me', { token: viewer.token, headers: { 'X-Org-Id': String(orgB) } });
      expect(inB.body.current_org_id).toBe(orgB);
      expect(inB.body.capabilities).toContain('org.admin');
      expect(inB.body.groups.map((g: { id: number }) => g.id)).toEqual([groupB]);
      expect(inB.body.organizations.map((o: { id: number }) => o.id)).toEqual([1, orgB]);
      const inA = await t.request('GET', '/api/me', { token: viewer.token, headers: { 'X-Org-Id': '1' } });
      expect(inA.body.current_org_id).toBe(1);
      expect(inA.body.capabilities).not.toContain('org.admin');
      expect(inA.body.groups).toEqual([]);
    });
  });

  describe('audit router', () => {
    let group: number;
    let member: { id: number; username: string; token: string };
    let orgAdmin: { id: number; username: string; token: string };
    let orgAdminGroup: number;
    let tBetween: string;
    let tBefore: string;
    let tAfter: string;

    beforeAll(async () => {
      member = await newUser(1);
      orgAdmin = await newUser(1);
      tBefore = new Date().toISOString();
      await sleep(15);
      group = await newGroup(1, ['groups.read']);
      await sleep(15);
      tBetween = new Date().toISOString();
      await sleep(15);
      await addToGroup(1, group, member.id);
      expect((await t.request('PATCH', `/api/groups/${group}`, { body: { capabilities: ['groups.read', 'org.admin'] } })).status).toBe(200);
      expect((await t.request('PATCH', `/api/groups/${group}`, { body: { name: uniq('renamed') } })).status).toBe(200);
      expect((await t.request('DELETE', `/api/groups/${group}/members/${member.id}`)).status).toBe(204);
      await sleep(15);
      tAfter = new Date().toISOString();
      // A second actor: an org admin (through a group) acting in organization 1.
      orgAdminGroup = await newGroup(1, ['org.admin']);
      await addToGroup(1, orgAdminGroup, orgAdmin.id);
      const ownGroup = await t.request('POST', '/api/groups', { token: orgAdmin.token, body: { name: uniq('by-org-admin'), capabilities: [] } });
      expect(ownGroup.status, ownGroup.text).toBe(201);
    });

    const audit = (query: string, token?: string) => t.request('GET', `/api/audit${query}`, token ? { token } : {});

    it('records group create, member add and capability change with actor and target', async () => {
      const res = await audit(`?target=group:${group}`);
      expect(res.status).toBe(200);
      const items = res.body.items as Record<string, any>[];
      expect(items.map((e) => e.action)).toEqual(['group.member.remove', 'group.update', 'group.capabilities.change', 'group.member.add', 'group.create']);
      for (const e of items) expect(e).toMatchObject({ actor_user_id: adminId, actor_username: 'admin', target_type: 'group', target_id: String(group), org_id: 1, outcome: 'success' });
      const byAction = Object.fromEntries(items.map((e) => [e.action, e]));
      expect(byAction['group.member.add'].details).toEqual({ user_id: member.id });
      expect(byAction['group.capabilities.change'].details.capabilities).toEqual({ from: ['groups.read'], to: ['groups.read', 'org.admin'] });
      expect(byAction['group.create'].details).toMatchObject({ capabilities: ['groups.read'] });
      // Newest first, ids strictly descending.
      const ids = items.map((e) => e.id);
      expect(ids).toEqual([...ids].sort((a, b) => b - a));
    });

    it('filters by actor (id or username), action (exact or prefix), target, since and until', async () => {
      const byActorId = await audit(`?actor=${orgAdmin.id}`);
      expect(byActorId.body.items.length).toBeGreaterThan(0);
      expect(byActorId.body.items.every((e: any) => e.actor_user_id === orgAdmin.id)).toBe(true);
      expect(byActorId.body.items.map((e: any) => e.action)).toContain('group.create');
      const byActorName = await audit(`?actor=${orgAdmin.username}`);
      expect(byActorName.body.items.map((e: any) => e.id)).toEqual(byActorId.body.items.map((e: any) => e.id));
      const byAdmin = await audit(`?actor=${adminId}&limit=500`);
      expect(byAdmin.body.items.every((e: any) => e.actor_user_id === adminId)).toBe(true);
      expect(byAdmin.body.items.some((e: any) => e.target_id === String(group))).toBe(true);

      const exact = await audit('?action=group.create&limit=500');
      expect(exact.body.items.length).toBeGreaterThan(1);
      expect(exact.body.items.every((e: any) => e.action === 'group.create')).toBe(true);
      expect(exact.body.items.some((e: any) => e.target_id === String(group))).toBe(true);

      const prefix = await audit('?action=group.*&limit=500');
      const actions = new Set(prefix.body.items.map((e: any) => e.action));
      expect([...actions].every((a) => String(a).startsWith('group.'))).toBe(true);
      expect([...actions]).toEqual(expect.arrayContaining(['group.create', 'group.member.add', 'group.capabilities.change', 'group.member.remove']));
      // The unfiltered log holds other actions too, so the prefix filter really filtered.
      const everything = await audit('?limit=500');
      expect(everything.body.items.some((e: any) => !String(e.action).startsWith('group.'))).toBe(true);

      const byType = await audit('?target=group&limit=500');
      expect(byType.body.items.every((e: any) => e.target_type === 'group')).toBe(true);
      expect(new Set(byType.body.items.map((e: any) => e.target_id)).size).toBeGreaterThan(1);

      const q = (s: string) => encodeURIComponent(s);
      const since = await audit(`?target=group:${group}&since=${q(tBetween)}`);
      expect(since.body.items.map((e: any) => e.action)).toEqual(['group.member.remove', 'group.update', 'group.capabilities.change', 'group.member.add']);
      const until = await audit(`?target=group:${group}&until=${q(tBetween)}`);
      expect(until.body.items.map((e: any) => e.action)).toEqual(['group.create']);
      const window = await audit(`?since=${q(tBefore)}&until=${q(tAfter)}&limit=500`);
      expect(window.body.items.filter((e: any) => e.target_id === String(group))).toHaveLength(5);
      expect(window.body.items.every((e: any) => e.at >= tBefore && e.at < tAfter)).toBe(true);
      expect(window.body.items.some((e: any) => e.target_id === String(orgAdminGroup))).toBe(false);
      expect((await audit(`?target=group:${group}&since=${q(tAfter)}`)).body.items).toEqual([]);

      const badSince = await audit('?since=yesterday');
      expect(badSince.status).toBe(400);
      expect(fieldPaths(badSince.body)).toEqual(['query.since']);
    });

    it('pages with a cursor: no overlap, no gap, ending with a null cursor', async () => {
      const full = await audit(`?target=group:${group}`);
      const expected = full.body.items.map((e: any) => e.id);
      expect(expected).toHaveLength(5);
      const seen: number[] = [];
      const sizes: number[] = [];
      let cursor: number | null = null;
      for (let page = 0; page < 10; page += 1) {
        const res = await audit(`?target=group:${group}&limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
        expect(res.status).toBe(200);
        const ids = res.body.items.map((e: any) => e.id);
        sizes.push(ids.length);
        for (const id of ids) expect(seen).not.toContain(id);
        seen.push(...ids);
        cursor = res.body.next_cursor;
        if (cursor === null) break;
        expect(cursor).toBe(ids[ids.length - 1]);
      }
      expect(cursor).toBeNull();
      expect(sizes).toEqual([2, 2, 1]);
      expect(seen).toEqual(expected);
    });

    it('is for org admins and platform admins only; an org admin sees their organization', async () => {
      const res = await audit('', member.token);
      expect(res.status).toBe(403);
      expect(res.body.detail).toMatch(/org\.admin/);
      const asOrgAdmin = await audit('?limit=500', orgAdmin.token);
      expect(asOrgAdmin.status).toBe(200);
      expect(asOrgAdmin.body.items.length).toBeGreaterThan(0);
      expect(asOrgAdmin.body.items.every((e: any) => e.org_id === 1)).toBe(true);
    });

    it('the audit table is append-only: UPDATE and DELETE fail in the database itself', async () => {
      const db = t.kernel.storage.db;
      const row = await db.selectFrom('audit_log').selectAll().where('action', '=', 'group.create').where('target_id', '=', String(group)).executeTakeFirstOrThrow();
      const count = async () => Number((await db.selectFrom('audit_log').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
      const before = await count();
      await expect(db.updateTable('audit_log').set({ action: 'tampered' }).where('id', '=', row.id).execute()).rejects.toThrow(/append-only/);
      await expect(db.updateTable('audit_log').set({ actor_user_id: null }).execute()).rejects.toThrow(/append-only/);
      await expect(db.deleteFrom('audit_log').where('id', '=', row.id).execute()).rejects.toThrow(/append-only/);
      await expect(db.deleteFrom('audit_log').execute()).rejects.toThrow(/append-only/);
      expect(await count()).toBe(before);
      expect(await db.selectFrom('audit_log').selectAll().where('id', '=', row.id).executeTakeFirstOrThrow()).toEqual(row);
    });
  });
});
