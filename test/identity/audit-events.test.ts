import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { startTestKernel, type TestKernel } from '../harness/index.ts';

interface AuditRow {
  action: string;
  outcome: string;
  actor_user_id: number | null;
  actor_username: string | null;
  target_type: string | null;
  target_id: string | null;
  org_id: number | null;
  request_id: string | null;
  details: Record<string, unknown>;
}

/**
 * Account, organization and group changes made through the API each leave one audit row naming who
 * did it, to what, in which organization, and the request it happened in.
 */
describe.each(DIALECTS)('audit of account, membership and group changes (%s)', (dialect) => {
  let t: TestKernel;
  let adminId: number;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    adminId = (await t.request('GET', '/api/me')).body.user.id;
  });
  afterAll(async () => t?.stop());

  /** Makes the change, then finds the one audit row of `action` its request wrote. */
  const audited = async (action: string, change: () => ReturnType<TestKernel['request']>, expectedStatus: number): Promise<AuditRow> => {
    const res = await change();
    expect(res.status, `${action}: ${res.text}`).toBe(expectedStatus);
    const audit = await t.request('GET', `/api/audit?action=${action}&limit=500`);
    expect(audit.status).toBe(200);
    const rows = (audit.body.items as AuditRow[]).filter((r) => r.request_id === res.headers.get('x-request-id'));
    expect(rows, action).toHaveLength(1);
    return rows[0];
  };

  it('user.update, user.deactivate, organization.create, organization.member.add/remove and group.delete name actor, target and organization', async () => {
    const byAdmin = { outcome: 'success', actor_user_id: adminId, actor_username: 'admin' };
    const user = await t.userToken('viewer', 'audited-user');

    const created = await audited('organization.create', () => t.request('POST', '/api/organizations', { body: { name: 'Audited Ltd' } }), 201);
    const orgId = Number(created.target_id);
    expect(created).toMatchObject({ ...byAdmin, target_type: 'organization', org_id: orgId, details: { name: 'Audited Ltd' } });

    const added = await audited('organization.member.add', () => t.request('POST', `/api/organizations/${orgId}/members`, { body: { user_id: user.id } }), 201);
    expect(added).toMatchObject({ ...byAdmin, target_type: 'user', target_id: String(user.id), org_id: orgId });

    const removed = await audited('organization.member.remove', () => t.request('DELETE', `/api/organizations/${orgId}/members/${user.id}`), 204);
    expect(removed).toMatchObject({ ...byAdmin, target_type: 'user', target_id: String(user.id), org_id: orgId });

    const inOrg = { headers: { 'X-Org-Id': String(orgId) } };
    const group = await t.request('POST', '/api/groups', { ...inOrg, body: { name: 'short-lived', capabilities: ['groups.read'] } });
    expect(group.status, group.text).toBe(201);
    const deleted = await audited('group.delete', () => t.request('DELETE', `/api/groups/${group.body.id}`, inOrg), 204);
    expect(deleted).toMatchObject({ ...byAdmin, target_type: 'group', target_id: String(group.body.id), org_id: orgId, details: { name: 'short-lived', capabilities: ['groups.read'] } });

    // The users router is platform-wide: its events belong to the admin's current organization (1).
    const updated = await audited('user.update', () => t.request('PATCH', `/api/users/${user.id}`, { body: { role: 'editor' } }), 200);
    expect(updated).toMatchObject({ ...byAdmin, target_type: 'user', target_id: String(user.id), org_id: 1, details: { changes: { role: { from: 'viewer', to: 'editor' } } } });

    const deactivated = await audited('user.deactivate', () => t.request('DELETE', `/api/users/${user.id}`), 200);
    expect(deactivated).toMatchObject({ ...byAdmin, target_type: 'user', target_id: String(user.id), org_id: 1 });
  });
});
