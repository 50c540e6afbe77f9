import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunNotAuthorizedError } from '../../kernel/auth/run-principals.ts';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

type AuditPage = { items: Record<string, unknown>[] };

/**
 * Work outside any request acts as a run principal: resolved from the user it acts for when it
 * starts, and audited as that run and that user, with no request id or address.
 */
describe.each(DIALECTS)('background runs as principals (%s)', (dialect) => {
  let t: TestKernel;
  let editor: { id: number; token: string };
  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    editor = await t.userToken('editor', 'run-owner');
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('audits a run\u2019s events as the run and the user it acts for, without a request', async () => {
    const run = await t.kernel.runPrincipals.forRun({ runId: 4242, orgId: 1, userId: editor.id });
    expect(run).toMatchObject({ kind: 'run', runId: 4242, orgId: 1, onBehalfOf: { userId: editor.id, username: 'run-owner' } });
    await t.kernel.audit.forPrincipal(run, run.orgId).record({ action: 'work.finished', targetType: 'dataset', targetId: 7 });

    const byRun = await t.request<AuditPage>('GET', '/api/audit?actor=run:4242');
    expect(byRun.status, byRun.text).toBe(200);
    expect(byRun.body.items).toHaveLength(1);
    expect(byRun.body.items[0]).toMatchObject({
      action: 'work.finished',
      actor_kind: 'run',
      actor_run_id: 4242,
      actor_user_id: editor.id,
      actor_username: 'run-owner',
      actor_api_key_id: null,
      org_id: 1,
      request_id: null,
      ip: null,
    });
    // Filtering by the user finds the work done on their behalf; by kind, only runs.
    const byUser = await t.request<AuditPage>('GET', `/api/audit?actor=${editor.id}`);
    expect(byUser.body.items.map((row) => row.action)).toContain('work.finished');
    const byKind = await t.request<AuditPage>('GET', '/api/audit?actor_kind=run');
    expect(byKind.body.items.map((row) => row.actor_run_id)).toEqual([4242]);
  });

  it('gives a run the capabilities its user has in the organization, narrowed to recorded scopes', async () => {
    const full = await t.kernel.runPrincipals.forRun({ runId: 1, orgId: 1, userId: editor.id });
    expect(full.capabilities.has('datasets.write')).toBe(true);
    expect(full.capabilities.has('users.manage')).toBe(false);
    const scoped = await t.kernel.runPrincipals.forRun({ runId: 2, orgId: 1, userId: editor.id, scopes: ['datasets.read', 'users.manage'] });
    expect([...scoped.capabilities]).toEqual(['datasets.read']);
    // The narrowed set is the run's own: the user's next request still has everything.
    const again = await t.kernel.runPrincipals.forRun({ runId: 3, orgId: 1, userId: editor.id });
    expect(again.capabilities.has('datasets.write')).toBe(true);
  });

  it('refuses a run whose user left the organization or was deactivated', async () => {
    const outsider = await t.outsider('run-outsider');
    await expect(t.kernel.runPrincipals.forRun({ runId: 5, orgId: 1, userId: outsider.userId })).rejects.toThrow(RunNotAuthorizedError);
    await expect(t.kernel.runPrincipals.forRun({ runId: 5, orgId: outsider.orgId, userId: outsider.userId })).resolves.toMatchObject({ orgId: outsider.orgId });
    expect((await t.request('DELETE', `/api/users/${outsider.userId}`)).status).toBe(200);
    await expect(t.kernel.runPrincipals.forRun({ runId: 5, orgId: outsider.orgId, userId: outsider.userId })).rejects.toThrow(/deactivated/);
    await expect(t.kernel.runPrincipals.forRun({ runId: 6, orgId: 1, userId: 999_999 })).rejects.toThrow(/no longer exists/);
  });

  it('keeps answering rows written before callers had kinds: a named actor was a user, none the platform', async () => {
    const row = { at: t.kernel.storage.now(), action: 'legacy.event', outcome: 'success', details: t.kernel.storage.encodeJson({}), org_id: 1 };
    await t.kernel.storage.db.insertInto('audit_log').values({ ...row, actor_user_id: editor.id, actor_username: 'run-owner' }).execute();
    await t.kernel.storage.db.insertInto('audit_log').values(row).execute();
    const res = await t.request<AuditPage>('GET', '/api/audit?action=legacy.event');
    expect(res.body.items.map((r) => r.actor_kind)).toEqual([null, 'user']);
  });

  it('audits a user\u2019s request as a user', async () => {
    expect((await t.request('POST', '/api/projects', { token: editor.token, body: { key: 'AUD', name: 'audited' } })).status).toBe(201);
    const res = await t.request<AuditPage>('GET', `/api/audit?actor=${editor.id}&actor_kind=user`);
    expect(res.body.items[0]).toMatchObject({ actor_kind: 'user', actor_user_id: editor.id, actor_run_id: null });
  });
});
