import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, until, type TestKernel } from '../harness/index.ts';
import { startSmtpServer, type TestSmtpServer } from '../harness/smtp-server.ts';
import { expectProblem } from '../harness/answers.ts';

type Item = { id: number; type: string; title: string; body: string; link: string | null; org_id: number | null; read_at: string | null };

/** Issue 18, "Notifications": through HTTP on both adapters, e-mail through a real SMTP server. */
describe.each(DIALECTS)('notifications (%s)', (dialect) => {
  let t: TestKernel;
  let smtp: TestSmtpServer;
  let editor: { id: number; token: string };
  let other: { id: number; token: string };
  let projectId: number;
  let numbersId: number;

  const inbox = async (token: string, query = '') => (await t.request('GET', `/api/notifications${query}`, { token })).body.items as Item[];
  const arrives = (token: string, type: string, count = 1) => until(() => inbox(token), (items) => items.filter((i) => i.type === type).length >= count, 20_000);
  const runEnds = (id: number) => until(() => t.request('GET', `/api/pipeline/runs/${id}`), (r) => ['succeeded', 'failed', 'cancelled'].includes(r.body.status), 30_000);

  /** A recipe of `token`'s whose run fails: its input lost the column it reads. */
  async function failingRecipeRun(token: string, name: string) {
    const raw = (await t.request('POST', '/api/datasets', { token, body: { project_id: projectId, name: `${name}_in`, columns: [{ name: 'n', type: 'integer' }] } })).body;
    await t.request('POST', `/api/datasets/${raw.id}/data`, { token, body: 'n\n1\n', headers: { 'content-type': 'text/csv' } });
    const out = (await t.request('POST', '/api/datasets', { token, body: { project_id: projectId, name: `${name}_out`, columns: [] } })).body;
    const recipe = (await t.request('POST', '/api/pipeline/recipes', { token, body: { project_id: projectId, name, type: 'sql', inputs: [raw.id], outputs: [out.id], params: { query: `select n from ${name}_in` } } })).body;
    await t.request('POST', `/api/datasets/${raw.id}/data?mode=replace`, { token, body: 'm\n1\n', headers: { 'content-type': 'text/csv' } });
    const started = await t.request('POST', `/api/pipeline/recipes/${recipe.id}/run`, { token });
    expect(started.status, started.text).toBe(202);
    const ended = await runEnds(started.body.run.id);
    expect(ended.body.status).toBe('failed');
    return ended.body.id as number;
  }

  beforeAll(async () => {
    smtp = await startSmtpServer();
    t = await startTestKernel({ dialect, env: { SMTP_URL: smtp.url, NOTIFY_EXPIRY_CHECK_CRON: '* * * * * *', WORKER_POLL_MS: '50', PUBLIC_URL: 'https://data.example.test' } });
    editor = await t.userToken('editor');
    other = await t.userToken('editor');
    await t.request('PUT', '/api/branding', { body: { display_name: 'Acme Data', primary_color: '#0b3d5c', email_footer: 'Acme Inc. · 1 Main St' } });
    projectId = (await t.request('POST', '/api/projects', { body: { key: 'NOTE', name: 'Notes' } })).body.id;
    numbersId = (await t.request('POST', '/api/datasets', { body: { project_id: projectId, name: 'numbers', columns: [{ name: 'n', type: 'integer' }, { name: 'label', type: 'string' }] } })).body.id;
    await t.request('POST', `/api/datasets/${numbersId}/data`, { body: 'n,label\n1,a\n2,\n', headers: { 'content-type': 'text/csv' } });
  });
  afterAll(async () => {
    await t?.stop();
    await smtp?.close();
  });

  it('tells the starter of a run that failed, and only them: list, unread count, read, read all, delete', async () => {
    const runId = await failingRecipeRun(editor.token, 'fails_once');
    const items = await arrives(editor.token, 'run.failed');
    const note = items.find((i) => i.link === `/api/pipeline/runs/${runId}`)!;
    expect(note).toMatchObject({ type: 'run.failed', title: `Recipe run ${runId} failed`, org_id: 1, read_at: null });
    expect(note.body).toContain('the query is refused');
    expect(await inbox(other.token)).toEqual([]);
    expectProblem(await t.request('POST', `/api/notifications/${note.id}/read`, { token: other.token }), 404);
    expectProblem(await t.request('DELETE', `/api/notifications/${note.id}`, { token: other.token }), 404);

    expect((await t.request('GET', '/api/notifications/unread-count', { token: editor.token })).body).toEqual({ count: 1 });
    const read = await t.request('POST', `/api/notifications/${note.id}/read`, { token: editor.token });
    expect(read.status, read.text).toBe(200);
    expect(read.body.read_at).toEqual(expect.any(String));
    expect((await t.request('POST', `/api/notifications/${note.id}/read`, { token: editor.token })).body.read_at).toBe(read.body.read_at);
    expect((await t.request('GET', '/api/notifications/unread-count', { token: editor.token })).body).toEqual({ count: 0 });
    expect(await inbox(editor.token, '?unread=true')).toEqual([]);

    await failingRecipeRun(editor.token, 'fails_twice');
    await arrives(editor.token, 'run.failed', 2);
    expect((await t.request('POST', '/api/notifications/read-all', { token: editor.token })).body).toEqual({ updated: 1 });
    expect((await t.request('GET', '/api/notifications/unread-count', { token: editor.token })).body).toEqual({ count: 0 });
    // Paged newest first.
    const first = await t.request('GET', '/api/notifications?limit=1', { token: editor.token });
    expect(first.body.items).toHaveLength(1);
    const second = await t.request('GET', `/api/notifications?limit=1&cursor=${first.body.next_cursor}`, { token: editor.token });
    expect(second.body.items[0].id).toBeLessThan(first.body.items[0].id);
    expectProblem(await t.request('GET', '/api/notifications?cursor=not-ours', { token: editor.token }), 400, 'query.cursor');

    expect((await t.request('DELETE', `/api/notifications/${note.id}`, { token: editor.token })).status).toBe(204);
    expectProblem(await t.request('DELETE', `/api/notifications/${note.id}`, { token: editor.token }), 404);
    expect((await inbox(editor.token)).map((i) => i.id)).not.toContain(note.id);
  });

  it('keeps per-type preferences; e-mails come through the mailer in the organization\u2019s branding', async () => {
    const defaults = await t.request('GET', '/api/notifications/preferences', { token: other.token });
    expect(defaults.body.items.find((p: { type: string }) => p.type === 'run.failed')).toMatchObject({ in_app: true, email: false });
    expect(defaults.body.items.map((p: { type: string }) => p.type)).toEqual(['run.failed', 'scenario.failed', 'schema.drift.breaking', 'quality.rule.failed', 'token.expiring', 'token.revoked', 'api_key.expiring', 'dashboard.published', 'llm.quota.alert']);
    const chosen = await t.request('PUT', '/api/notifications/preferences', { token: other.token, body: { items: [{ type: 'run.failed', in_app: false, email: true }] } });
    expect(chosen.status, chosen.text).toBe(200);
    expect(chosen.body.items.find((p: { type: string }) => p.type === 'run.failed')).toMatchObject({ in_app: false, email: true });
    for (const body of [{ items: [{ type: 'nope', in_app: true, email: true }] }, { items: [{ type: 'run.failed', in_app: 'yes', email: true }] }, { items: [] }, { items: [{ type: 'run.failed', in_app: true, email: true }, { type: 'run.failed', in_app: true, email: false }] }, { items: [{ type: "run.failed' or '1'='1", in_app: true, email: true }] }]) {
      expectProblem(await t.request('PUT', '/api/notifications/preferences', { token: other.token, body }), 400);
    }

    const runId = await failingRecipeRun(other.token, 'mailed');
    const address = String((await t.request('GET', '/api/me', { token: other.token })).body.user.email).toLowerCase();
    const mail = await smtp.waitFor((m) => m.to.includes(address) && m.subject.includes(`${runId}`), 20_000);
    expect(mail.subject).toBe(`[Acme Data] Recipe run ${runId} failed`);
    expect(mail.text).toContain(`https://data.example.test/api/pipeline/runs/${runId}`);
    expect(mail.text).toContain('Acme Inc. · 1 Main St');
    expect(mail.html).toContain('background:#0b3d5c');
    expect(mail.html).toContain('Acme Data');
    // E-mail only: nothing in the inbox.
    expect(await inbox(other.token)).toEqual([]);
    await t.request('PUT', '/api/notifications/preferences', { token: other.token, body: { items: [{ type: 'run.failed', in_app: true, email: false }] } });
  });

  it('tells of a failed scenario and the breaking drift it found, and of a failed data-quality rule of severity error', async () => {
    const contract = await t.request('POST', `/api/datasets/${numbersId}/contract`);
    expect(contract.status, contract.text).toBe(201);
    const drifting = (await t.request('POST', '/api/datasets', { token: editor.token, body: { project_id: projectId, name: 'drifting', columns: [{ name: 'a', type: 'integer' }, { name: 'b', type: 'string' }] } })).body;
    await t.request('POST', `/api/datasets/${drifting.id}/data`, { token: editor.token, body: 'a,b\n1,x\n', headers: { 'content-type': 'text/csv' } });
    expect((await t.request('POST', `/api/datasets/${drifting.id}/contract`, { token: editor.token })).status).toBe(201);
    await t.request('POST', `/api/datasets/${drifting.id}/data?mode=replace`, { token: editor.token, body: 'a\n1\n', headers: { 'content-type': 'text/csv' } });
    const scenario = await t.request('POST', '/api/pipeline/scenarios', { token: editor.token, body: { project_id: projectId, name: 'gate', steps: [{ type: 'check_schema_drift', name: 'drift gate', params: { datasets: [drifting.id] } }] } });
    expect(scenario.status, scenario.text).toBe(201);
    const started = await t.request('POST', `/api/pipeline/scenarios/${scenario.body.id}/run`, { token: editor.token });
    expect(started.status, started.text).toBe(202);
    expect((await runEnds(started.body.run.id)).body.status).toBe('failed');
    const items = await arrives(editor.token, 'schema.drift.breaking');
    expect(items.find((i) => i.type === 'schema.drift.breaking')).toMatchObject({ title: 'Breaking schema drift in drifting', body: expect.stringContaining('b removed'), link: `/api/datasets/${drifting.id}/drift` });
    const failed = (await arrives(editor.token, 'scenario.failed')).find((i) => i.type === 'scenario.failed')!;
    expect(failed).toMatchObject({ title: `Scenario run ${started.body.run.id} failed`, link: `/api/pipeline/runs/${started.body.run.id}` });

    const rule = await t.request('POST', '/api/data-quality/rules', { token: editor.token, body: { dataset_id: numbersId, name: 'labels present', type: 'not_null', severity: 'error', params: { column: 'label' } } });
    expect(rule.status, rule.text).toBe(201);
    const warn = await t.request('POST', '/api/data-quality/rules', { token: editor.token, body: { dataset_id: numbersId, name: 'labels warn', type: 'not_null', severity: 'warn', params: { column: 'label' } } });
    expect((await t.request('POST', `/api/data-quality/rules/${warn.body.id}/run`, { token: editor.token })).body.status).toBe('failed');
    expect((await t.request('POST', `/api/data-quality/rules/${rule.body.id}/run`, { token: editor.token })).body.status).toBe('failed');
    const quality = (await arrives(editor.token, 'quality.rule.failed')).filter((i) => i.type === 'quality.rule.failed');
    // Severity warn tells nobody.
    expect(quality).toHaveLength(1);
    expect(quality[0]).toMatchObject({ title: 'Data-quality rule "labels present" failed on numbers', link: `/api/data-quality/rules/${rule.body.id}/runs` });
  });

  it('reminds of tokens and data API keys expiring within 7 days and within 1 day, once each, and tells an owner an admin revoked their token', async () => {
    const soon = await t.request('POST', '/api/auth/tokens', { token: other.token, body: { name: 'one-day', expires_in_days: 1 } });
    const week = await t.request('POST', '/api/auth/tokens', { token: other.token, body: { name: 'three-days', expires_in_days: 3 } });
    await t.request('POST', '/api/auth/tokens', { token: other.token, body: { name: 'quarter', expires_in_days: 90 } });
    expect(soon.status, soon.text).toBe(201);
    const items = await arrives(other.token, 'token.expiring', 2);
    const reminders = items.filter((i) => i.type === 'token.expiring').map((i) => i.title).sort();
    expect(reminders).toEqual(['Your token "one-day" expires within a day', 'Your token "three-days" expires within 7 days']);
    // E-mailed by default, in the branding of the user's organization.
    const mail = await smtp.waitFor((m) => m.subject.includes('expires within a day'), 20_000);
    expect(mail.subject).toBe('[Acme Data] Your token "one-day" expires within a day');
    expect(mail.text).not.toContain(soon.body.token);
    // The check runs every second here: still one reminder each.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect((await inbox(other.token)).filter((i) => i.type === 'token.expiring')).toHaveLength(2);
    expect(week.body.token).toBeDefined();

    // A data API key of a published service, expiring in two days: its minter hears of it.
    const service = (await t.request('POST', '/api/publishing/api-services', { token: editor.token, body: { project_id: projectId, name: 'notes', key: `notes-${dialect}`, endpoints: [{ name: 'one', kind: 'sql', config: { query: 'select count(*) as n from numbers' } }] } })).body;
    expect((await t.request('POST', `/api/publishing/api-services/${service.id}/publish`, { token: editor.token })).status).toBe(200);
    const key = await t.request('POST', `/api/publishing/api-services/${service.id}/keys`, { token: editor.token, body: { name: 'partner', expires_at: new Date(Date.now() + 2 * 86_400_000).toISOString() } });
    expect(key.status, key.text).toBe(201);
    const keyNote = (await arrives(editor.token, 'api_key.expiring')).find((i) => i.type === 'api_key.expiring')!;
    expect(keyNote).toMatchObject({ title: 'Data API key "partner" expires within 7 days', org_id: 1, link: `/api/publishing/api-services/${service.id}/keys` });

    // Revoked by an org admin: its owner is told; revoking one's own token tells nobody.
    const revoked = await t.request('DELETE', `/api/auth/tokens/admin/${week.body.id}`);
    expect(revoked.status, revoked.text).toBe(200);
    const revokedNote = (await arrives(other.token, 'token.revoked')).find((i) => i.type === 'token.revoked')!;
    expect(revokedNote.title).toBe('Your token "three-days" was revoked by an administrator');
    expect((await t.request('DELETE', `/api/auth/tokens/${soon.body.id}`, { token: other.token })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await inbox(other.token)).filter((i) => i.type === 'token.revoked')).toHaveLength(1);
  });

  it('tells the creator of a dashboard it was published; nothing reaches a user of another organization or one who left', async () => {
    const dashboard = (await t.request('POST', '/api/dashboards', { token: editor.token, body: { project_id: projectId, name: 'Told board' } })).body;
    expect((await t.request('POST', `/api/dashboards/${dashboard.id}/publish`, { body: {} })).status).toBe(201);
    const note = (await arrives(editor.token, 'dashboard.published')).find((i) => i.type === 'dashboard.published')!;
    expect(note).toMatchObject({ title: 'Dashboard "Told board" was published', link: `/api/dashboards/${dashboard.id}/publish`, org_id: 1 });

    const outsider = await t.outsider('notes-outsider');
    const before = await inbox(outsider.token);
    // Organization 1's events never reach the outsider, even about a run they could name.
    const notTheirs = await failingRecipeRun(editor.token, 'not_theirs');
    const told = await until(() => inbox(editor.token), (items) => items.some((i) => i.link === `/api/pipeline/runs/${notTheirs}`), 20_000);
    expect(told.some((i) => i.link === `/api/pipeline/runs/${notTheirs}`)).toBe(true);
    expect(await inbox(outsider.token)).toEqual(before);

    // A user removed from the organization hears nothing of it any more.
    const leaver = await t.userToken('editor');
    const board = (await t.request('POST', '/api/dashboards', { token: leaver.token, body: { project_id: projectId, name: 'Left board' } })).body;
    expect((await t.request('DELETE', `/api/organizations/1/members/${leaver.id}`)).status).toBe(204);
    expect((await t.request('POST', `/api/dashboards/${board.id}/publish`, { body: {} })).status).toBe(201);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await inbox(leaver.token)).filter((i) => i.type === 'dashboard.published')).toEqual([]);
  });
});
