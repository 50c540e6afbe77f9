import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratchDatabase, DIALECTS, REPO_ROOT, startTestKernel, tempDir, until, type TestKernel } from '../harness/index.ts';
import { client, killAll, killHard, launch, serverSettings, type ServerProcess } from '../harness/server-process.ts';
import { expectProblem } from '../harness/answers.ts';

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * A real HTTP receiver on loopback: it records every request and answers each with the next status
 * of `script` (then 200s).
 */
async function startReceiver() {
  const received: Received[] = [];
  const script: number[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      // A target under /down is always down; the others answer as the script says, then 200.
      const status = req.url?.startsWith('/down') ? 500 : (script.shift() ?? 200);
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(status === 200 ? 'ok' : 'receiver is down');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, received, script, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const signed = (secret: string, body: string) => `sha256=${crypto.createHmac('sha256', secret).update(body).digest('hex')}`;

const SECRET = 'whsec-0123456789abcdef-not-shown';

/** Issue 18, "Webhook subscriptions": through HTTP on both adapters, with a real receiver on loopback. */
describe.each(DIALECTS)('webhook subscriptions (%s)', (dialect) => {
  let t: TestKernel;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let projectId: number;

  const subscribe = (event_type: string, target = `${receiver.url}/hook`, secret = SECRET) => t.request('POST', '/api/webhooks', { body: { event_type, target_url: target, secret, description: `${event_type} to the receiver` } });
  const deliveries = async (id: number) => (await t.request('GET', `/api/webhooks/${id}/deliveries`)).body.items as Record<string, any>[];
  const settled = (id: number, count = 1) => until(() => deliveries(id), (items) => items.length >= count && items.every((d) => d.status !== 'pending'), 20_000);

  beforeAll(async () => {
    receiver = await startReceiver();
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1', WEBHOOK_RETRY_BASE_MS: '100', WORKER_POLL_MS: '50' } });
    projectId = (await t.request('POST', '/api/projects', { body: { key: 'HOOKS', name: 'Hooks' } })).body.id;
  });
  afterAll(async () => {
    await t?.stop();
    await receiver?.close();
  });

  it('creates, lists, changes and deletes a subscription; the secret is never answered, logged or audited', async () => {
    const created = await subscribe('dataset.updated');
    expect(created.status, created.text).toBe(201);
    expect(created.body).toEqual({ id: expect.any(Number), event_type: 'dataset.updated', target_url: `${receiver.url}/hook`, description: 'dataset.updated to the receiver', created_by: expect.any(Number), created_at: expect.any(String), updated_at: expect.any(String) });
    const id = created.body.id;
    const changed = await t.request('PATCH', `/api/webhooks/${id}`, { body: { event_type: 'run.finished', secret: `${SECRET}-2`, description: null } });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body).toMatchObject({ event_type: 'run.finished', description: null });
    const listed = await t.request('GET', '/api/webhooks');
    expect(listed.body.items.map((w: { id: number }) => w.id)).toContain(id);
    expect((await t.request('GET', `/api/webhooks/${id}`)).body.event_type).toBe('run.finished');
    const types = await t.request('GET', '/api/webhooks/event-types');
    expect(types.body.items.map((e: { type: string }) => e.type)).toEqual(['dataset.updated', 'run.finished', 'recipe.run.failed', 'scenario.failed', 'schema.drift.detected', 'dashboard.published', 'api_service.published', 'audit.security_event']);
    for (const answer of [created.text, changed.text, listed.text]) expect(answer).not.toContain(SECRET);
    const audit = await t.request('GET', '/api/audit?action=webhooks.*');
    expect(audit.body.items.map((e: { action: string }) => e.action)).toEqual(expect.arrayContaining(['webhooks.create', 'webhooks.update']));
    expect(audit.text).not.toContain(SECRET);
    const stored = await t.kernel.storage.db.selectFrom('webhooks').select('secret_sealed').where('id', '=', id).executeTakeFirstOrThrow();
    expect(stored.secret_sealed).not.toContain(SECRET);
    expect((await t.request('DELETE', `/api/webhooks/${id}`)).status).toBe(204);
    expectProblem(await t.request('GET', `/api/webhooks/${id}`), 404);
  });

  it('refuses an unknown event type, a target the outbound guard refuses and a short secret with a 400 naming the field', async () => {
    const before = (await t.request('GET', '/api/webhooks')).body.items.length;
    for (const type of ['dataset.deleted', 'ping', 'DATASET.UPDATED', "dataset.updated' or '1'='1", 'x'.repeat(101)]) expectProblem(await subscribe(type), 400, 'body.event_type');
    for (const target of ['http://10.0.0.8/hook', 'http://169.254.169.254/latest/meta-data', 'http://[::1]:8080/x', 'http://192.168.1.1/', 'http://198.18.0.1/', 'http://240.0.0.1/', 'http://[64:ff9b::a00:1]/', 'http://[2002:a00:1::]/', 'http://[::a00:1]/', 'ftp://example.test/x', 'file:///etc/passwd', 'not a url', 'http://user:pass@127.0.0.1/x', `http://127.0.0.1/${'x'.repeat(2000)}`]) {
      expectProblem(await subscribe('dataset.updated', target), 400, 'body.target_url');
    }
    expectProblem(await subscribe('dataset.updated', `${receiver.url}/hook`, 'short'), 400, 'body.secret');
    expectProblem(await t.request('POST', '/api/webhooks', { body: { event_type: 'dataset.updated', target_url: `${receiver.url}/hook` } }), 400, 'body.secret');
    expectProblem(await t.request('POST', '/api/webhooks', { body: { event_type: 'dataset.updated', target_url: `${receiver.url}/hook`, secret: SECRET, extra: 1 } }), 400);
    expect((await t.request('GET', '/api/webhooks')).body.items).toHaveLength(before);
    // Only an admin manages webhooks.
    const editor = await t.userToken('editor');
    expectProblem(await t.request('GET', '/api/webhooks', { token: editor.token }), 403);
  });

  it('pings a subscription: one signed POST of {id, type, created_at, org_id, data} with the service headers', async () => {
    const hook = (await subscribe('dashboard.published')).body;
    const start = receiver.received.length;
    const ping = await t.request('POST', `/api/webhooks/${hook.id}/ping`);
    expect(ping.status, ping.text).toBe(200);
    expect(ping.body).toMatchObject({ event_type: 'ping', status: 'succeeded', attempts: 1, last_status_code: 200, delivered_at: expect.any(String), event_id: expect.stringMatching(/^ping_/) });
    const [got] = receiver.received.slice(start);
    expect(got.headers['x-service-signature']).toBe(signed(SECRET, got.body));
    expect(got.headers['x-service-event']).toBe('ping');
    expect(got.headers['x-service-delivery']).toBe(String(ping.body.id));
    expect(got.headers['content-type']).toBe('application/json');
    expect(JSON.parse(got.body)).toEqual({ id: ping.body.event_id, type: 'ping', created_at: expect.any(String), org_id: 1, data: { webhook_id: hook.id, event_type: 'dashboard.published' } });
  });

  it('retries a receiver that fails twice with backoff, then succeeds: three attempts of one signed body, one success', async () => {
    const hook = (await subscribe('dataset.updated')).body;
    const dataset = (await t.request('POST', '/api/datasets', { body: { project_id: projectId, name: 'hooked', columns: [{ name: 'n', type: 'integer' }] } })).body;
    const start = receiver.received.length;
    receiver.script.push(500, 503);
    expect((await t.request('POST', `/api/datasets/${dataset.id}/data`, { body: 'n\n1\n2\n', headers: { 'content-type': 'text/csv' } })).status).toBe(200);
    const [delivery] = await settled(hook.id);
    expect(delivery).toMatchObject({ event_type: 'dataset.updated', status: 'succeeded', attempts: 3, last_status_code: 200, last_error: null, next_attempt_at: null });
    const got = receiver.received.slice(start);
    expect(got).toHaveLength(3);
    // The same body, event id and delivery each time, each signed with the secret.
    expect(new Set(got.map((r) => r.body)).size).toBe(1);
    for (const r of got) {
      expect(r.headers['x-service-signature']).toBe(signed(SECRET, r.body));
      expect(r.headers['x-service-delivery']).toBe(String(delivery.id));
    }
    const body = JSON.parse(got[0].body);
    expect(body).toEqual({ id: delivery.event_id, type: 'dataset.updated', created_at: expect.any(String), org_id: 1, data: { dataset_id: dataset.id, name: 'hooked', version: expect.any(Number), row_count: 2, mode: 'append' } });
    // A wrong secret does not verify.
    expect(got[0].headers['x-service-signature']).not.toBe(signed(`${SECRET}x`, got[0].body));
  });

  it('gives up when the 24 hours are over: the delivery is failed with the last error; redeliver sends it again', async () => {
    const hook = (await subscribe('api_service.published', `${receiver.url}/down`)).body;
    const ping = await t.request('POST', `/api/webhooks/${hook.id}/ping`);
    expect(ping.body).toMatchObject({ status: 'pending', attempts: 1, last_status_code: 500, last_error: 'answered 500', next_attempt_at: expect.any(String) });
    expectProblem(await t.request('POST', `/api/webhooks/${hook.id}/deliveries/${ping.body.id}/redeliver`), 409);
    // Its window closes (as if 24 hours had passed) and the receiver stays down: the next attempt gives up.
    await t.kernel.storage.db.updateTable('webhooks_deliveries').set({ deadline_at: new Date(Date.now() + 50).toISOString() }).where('id', '=', ping.body.id).execute();
    const [failed] = await settled(hook.id);
    expect(failed).toMatchObject({ id: ping.body.id, status: 'failed', last_status_code: 500, next_attempt_at: null, delivered_at: null });
    // The receiver is back (at its new address): a redelivery sends the same event again.
    expect((await t.request('PATCH', `/api/webhooks/${hook.id}`, { body: { target_url: `${receiver.url}/hook` } })).status).toBe(200);
    const again = await t.request('POST', `/api/webhooks/${hook.id}/deliveries/${ping.body.id}/redeliver`);
    expect(again.status, again.text).toBe(202);
    expect(again.body).toMatchObject({ status: 'pending', attempts: 0, event_id: ping.body.event_id });
    const [redelivered] = await settled(hook.id);
    expect(redelivered).toMatchObject({ status: 'succeeded', attempts: 1, event_id: ping.body.event_id });
    expectProblem(await t.request('POST', `/api/webhooks/${hook.id}/deliveries/999999/redeliver`), 404);
  });

  it('delivers a recipe run that failed (recipe.run.failed and run.finished), a published dashboard and API Service, and security events', async () => {
    const failedHook = (await subscribe('recipe.run.failed')).body;
    const finishedHook = (await subscribe('run.finished')).body;
    const publishedHook = (await subscribe('dashboard.published')).body;
    const serviceHook = (await subscribe('api_service.published')).body;
    const securityHook = (await subscribe('audit.security_event')).body;
    const raw = (await t.request('POST', '/api/datasets', { body: { project_id: projectId, name: 'raw_numbers', columns: [{ name: 'n', type: 'integer' }] } })).body;
    await t.request('POST', `/api/datasets/${raw.id}/data`, { body: 'n\n1\n', headers: { 'content-type': 'text/csv' } });
    const out = (await t.request('POST', '/api/datasets', { body: { project_id: projectId, name: 'numbers_out', columns: [] } })).body;
    const recipe = (await t.request('POST', '/api/pipeline/recipes', { body: { project_id: projectId, name: 'reads n', type: 'sql', inputs: [raw.id], outputs: [out.id], params: { query: 'select n from raw_numbers' } } })).body;
    // The input loses the column the recipe reads: its run fails.
    await t.request('POST', `/api/datasets/${raw.id}/data?mode=replace`, { body: 'm\n1\n', headers: { 'content-type': 'text/csv' } });
    const run = (await t.request('POST', `/api/pipeline/recipes/${recipe.id}/run`)).body.run;
    const [failure] = await settled(failedHook.id);
    expect(failure).toMatchObject({ event_type: 'recipe.run.failed', status: 'succeeded' });
    const failedBody = JSON.parse(receiver.received.find((r) => r.headers['x-service-delivery'] === String(failure.id))!.body);
    expect(failedBody.data).toMatchObject({ run_id: run.id, kind: 'recipe', status: 'failed', recipe_id: recipe.id, error: { title: expect.any(String) } });
    const finished = await settled(finishedHook.id);
    expect(finished.map((d) => d.event_id)).toContain(failure.event_id.replace('recipe.run.failed', 'run.finished'));

    const dashboard = (await t.request('POST', '/api/dashboards', { body: { project_id: projectId, name: 'Hooked board' } })).body;
    const link = (await t.request('POST', `/api/dashboards/${dashboard.id}/publish`, { body: {} })).body;
    const [published] = await settled(publishedHook.id);
    const publishedBody = JSON.parse(receiver.received.find((r) => r.headers['x-service-delivery'] === String(published.id))!.body);
    expect(publishedBody).toMatchObject({ type: 'dashboard.published', data: { dashboard_id: dashboard.id, link_id: link.id, name: 'Hooked board' } });
    expect(publishedBody.data).not.toHaveProperty('token');

    const service = (await t.request('POST', '/api/publishing/api-services', { body: { project_id: projectId, name: 'hooked', key: `hooked-${dialect}`, endpoints: [{ name: 'n', kind: 'sql', config: { query: 'select 1 as one' } }] } })).body;
    expect((await t.request('POST', `/api/publishing/api-services/${service.id}/publish`)).status).toBe(200);
    const [servicePublished] = await settled(serviceHook.id);
    expect(JSON.parse(receiver.received.find((r) => r.headers['x-service-delivery'] === String(servicePublished.id))!.body).data).toMatchObject({ service_id: service.id, key: `hooked-${dialect}` });

    // A personal access token minted: a security event (the token itself is never in it).
    const pat = await t.request('POST', '/api/auth/tokens', { body: { name: 'hooked-token' } });
    expect(pat.status, pat.text).toBe(201);
    // Its own subscription was a security event too: wait for the token's.
    const bodiesOf = (items: Record<string, any>[]) => items.map((d) => receiver.received.find((r) => r.headers['x-service-delivery'] === String(d.id))).filter((r) => r !== undefined).map((r) => JSON.parse(r.body));
    const security = await until(() => deliveries(securityHook.id), (items) => bodiesOf(items).some((e) => e.data.action === 'token.mint'), 20_000);
    const events = bodiesOf(security);
    expect(events.map((e) => e.data.action)).toContain('webhooks.create');
    const minted = events.find((e) => e.data.action === 'token.mint');
    expect(minted).toMatchObject({ type: 'audit.security_event', org_id: 1, data: { action: 'token.mint', outcome: 'success', actor_kind: 'user', target_type: 'token' } });
    for (const e of events) expect(JSON.stringify(e)).not.toContain(pat.body.token);
  });

  it('delivers only an organization\u2019s own events, and nothing where the plugin is off', async () => {
    const mine = (await subscribe('dataset.updated')).body;
    const outsider = await t.outsider('hooks-outsider');
    const theirProject = (await t.request('POST', '/api/projects', { token: outsider.token, body: { key: 'THEIRS', name: 'Theirs' } })).body;
    const theirs = (await t.request('POST', '/api/datasets', { token: outsider.token, body: { project_id: theirProject.id, name: 'theirs', columns: [{ name: 'n', type: 'integer' }] } })).body;
    expect((await t.request('POST', `/api/datasets/${theirs.id}/data`, { token: outsider.token, body: 'n\n1\n', headers: { 'content-type': 'text/csv' } })).status).toBe(200);
    // Their webhooks list is theirs: ours is not in it, nor reachable.
    expect((await t.request('GET', '/api/webhooks', { token: outsider.token })).status).toBe(403);

    expect((await t.request('PUT', '/api/plugins/webhooks/organizations/1', { body: { enabled: false } })).status).toBe(200);
    const ours = (await t.request('POST', '/api/datasets', { body: { project_id: projectId, name: 'while_off', columns: [{ name: 'n', type: 'integer' }] } })).body;
    await t.request('POST', `/api/datasets/${ours.id}/data`, { body: 'n\n1\n', headers: { 'content-type': 'text/csv' } });
    expectProblem(await t.request('GET', '/api/webhooks'), 404);
    expect((await t.request('PUT', '/api/plugins/webhooks/organizations/1', { body: { enabled: true } })).status).toBe(200);
    // A later event of ours is delivered: the one of the other organization and the one while off never were.
    await t.request('POST', `/api/datasets/${ours.id}/data`, { body: 'n\n2\n', headers: { 'content-type': 'text/csv' } });
    const items = await settled(mine.id);
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ status: 'succeeded' });
    const body = JSON.parse(receiver.received.find((r) => r.headers['x-service-delivery'] === String(items[0].id))!.body);
    expect(body).toMatchObject({ org_id: 1, data: { dataset_id: ours.id, row_count: 2 } });
  });
});

/** A delivery pending when its server process is killed is attempted again by the next process. */
describe.each(DIALECTS)('webhook deliveries across a restart (%s)', (dialect) => {
  const temp = tempDir('dp-webhooks-crash-');
  const live: ServerProcess[] = [];
  let database: Awaited<ReturnType<typeof createScratchDatabase>>;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  beforeAll(async () => {
    receiver = await startReceiver();
    database = await createScratchDatabase(dialect, temp.dir);
  });
  afterAll(async () => {
    await killAll(live);
    await receiver?.close();
    await database?.drop();
    temp.remove();
  });

  it('a delivery pending at a crash (SIGKILL) is delivered after the restart, once', { timeout: 120_000 }, async () => {
    const { env, token } = await serverSettings(temp.dir, database.url, [path.join(REPO_ROOT, 'manifests')]);
    const settings = { ...env, OUTBOUND_ALLOWED_HOSTS: '127.0.0.1', WEBHOOK_RETRY_BASE_MS: '3000' };
    let server = await launch(settings, live);
    let api = client(server.url, token);
    const hook = await api('POST', '/api/webhooks', { event_type: 'dataset.updated', target_url: `${receiver.url}/hook`, secret: SECRET });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    const project = await api('POST', '/api/projects', { key: 'CRASH', name: 'Crash' });
    const dataset = await api('POST', '/api/datasets', { project_id: project.body.id, name: 'crashing', columns: [{ name: 'n', type: 'integer' }] });
    receiver.script.push(500, 500, 500, 500, 500, 500, 500, 500, 500, 500);
    expect((await api('POST', `/api/datasets/${dataset.body.id}/data`, 'n\n1\n', 'text/csv')).status).toBe(200);
    const log = async () => (await api('GET', `/api/webhooks/${hook.body.id}/deliveries`)).body.items as Record<string, any>[];
    const failing = await until(log, (items) => items.length === 1 && items[0].attempts >= 1, 20_000);
    expect(failing[0]).toMatchObject({ status: 'pending', last_status_code: 500 });

    await killHard(server);
    receiver.script.length = 0;
    const before = receiver.received.length;
    server = await launch(settings, live);
    api = client(server.url, token);
    const delivered = await until(log, (items) => items[0]?.status === 'succeeded', 60_000);
    expect(delivered[0]).toMatchObject({ status: 'succeeded', last_status_code: 200 });
    expect(receiver.received.length - before).toBe(1);
    const last = receiver.received[receiver.received.length - 1];
    expect(last.headers['x-service-signature']).toBe(signed(SECRET, last.body));
  });
});
