import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { FIXTURE_PLUGINS, REPO_ROOT, startTestKernel, tempDir, until, type TestKernel } from '../harness/index.ts';

/** The fixture copied into a folder outside the repository, with its manifest, as a third party installs it. */
function installWorkerPlugin(dir: string, manifest: Record<string, unknown> = {}) {
  fs.mkdirSync(path.join(dir, 'worker'), { recursive: true });
  fs.copyFileSync(path.join(FIXTURE_PLUGINS, 'worker/index.ts'), path.join(dir, 'worker/index.ts'));
  fs.writeFileSync(
    path.join(dir, 'worker.json'),
    JSON.stringify({ id: 'worker', version: '1.0.0', kind: 'router', entry: './worker/index.ts', router: { prefix: '/api/worker', tag: 'worker' }, ...manifest }),
  );
}

// A lease long enough that a busy test machine's pauses do not expire it: takeover is tested with leases already past.
const FAST = { WORKER_POLL_MS: '50', EVENTS_POLL_MS: '50', WORKER_LEASE_MS: '5000' };

describe.each(DIALECTS)('background work and durable events (%s)', (dialect) => {
  let t: TestKernel;
  const plugins = tempDir('dp-third-party-');
  const item = (id: number) => t.request('GET', `/api/worker/items/${id}`);
  const settled = (id: number) => until(() => item(id), (r) => !['queued', 'running'].includes(r.body.status));
  const enqueue = async (name: string, payload?: unknown, headers?: Record<string, string>) => {
    const res = await t.request('POST', '/api/worker/items', { body: { name, payload }, headers });
    expect(res.status, res.text).toBe(202);
    return res.body as { id: number; status: string };
  };

  beforeAll(async () => {
    installWorkerPlugin(plugins.dir);
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), plugins.dir], env: { ...FAST, PLUGIN_DRAIN_TIMEOUT_MS: '300' } });
  });
  afterAll(async () => {
    await t?.stop();
    plugins.remove();
  });

  it('runs enqueued work outside the request, with progress, a result and the user it acts for', async () => {
    const queued = await enqueue('sleep', { ms: 150, steps: 3 });
    expect(queued.status).toBe('queued');
    const done = await settled(queued.id);
    expect(done.body).toMatchObject({ status: 'succeeded', result: { slept: 150, version: '1.0.0', acting_for: 'admin', can_write_datasets: true }, progress: { done: 3, total: 3 }, attempts: 1, org_id: 1, on_behalf_of: 1, reason: null });
    // Its audit rows name the run and the user it acts for.
    const audit = await t.request('GET', '/api/audit?action=worker.slept');
    expect(audit.body.items.find((row: { target_id: string }) => row.target_id === String(queued.id))).toMatchObject({ actor_kind: 'run', actor_run_id: queued.id, actor_user_id: 1, actor_username: 'admin', org_id: 1 });
  });

  it('runs work as the user asked for it: with a viewer’s capabilities, and not at all once that user is deactivated', async () => {
    const viewer = await t.userToken('viewer', `viewer-${dialect}`);
    const asViewer = await t.request('POST', '/api/worker/items', { token: viewer.token, body: { name: 'sleep', payload: { ms: 1 } } });
    expect((await settled(asViewer.body.id)).body).toMatchObject({ status: 'succeeded', on_behalf_of: viewer.id, result: { acting_for: `viewer-${dialect}`, can_write_datasets: false } });

    const later = await t.request('POST', '/api/worker/items', { token: viewer.token, body: { name: 'sleep', payload: { ms: 1 }, run_after: new Date(Date.now() + 500).toISOString() } });
    expect((await t.request('PATCH', `/api/users/${viewer.id}`, { body: { is_active: false } })).status).toBe(200);
    expect((await settled(later.body.id)).body).toMatchObject({ status: 'failed', reason: 'forbidden' });
  });

  it('refuses a payload its handler does not accept: the item fails naming why', async () => {
    const queued = await enqueue('sleep', { ms: 'soon' });
    const done = await settled(queued.id);
    expect(done.body.status).toBe('failed');
    expect(done.body.reason).toBe('error');
    expect(done.body.error).toMatch(/payload/);
  });

  it('cancels running work through its AbortSignal, and queued work at once', async () => {
    const running = await enqueue('sleep', { ms: 20_000, steps: 200 });
    await until(() => item(running.id), (r) => r.body.status === 'running');
    const cancel = await t.request('POST', `/api/worker/items/${running.id}/cancel`);
    expect(cancel.status).toBe(200);
    const done = await settled(running.id);
    expect(done.body).toMatchObject({ status: 'cancelled', reason: 'cancelled' });
    const runs = (await t.request('GET', '/api/worker/runs')).body.runs.filter((r: { item_id: number }) => r.item_id === running.id);
    expect(runs.map((r: { outcome: string }) => r.outcome)).toEqual(['started']); // stopped before it finished

    const later = await t.request('POST', '/api/worker/items', { body: { name: 'sleep', payload: { ms: 1 }, run_after: new Date(Date.now() + 3_600_000).toISOString() } });
    const cancelled = await t.request('POST', `/api/worker/items/${later.body.id}/cancel`);
    expect(cancelled.body).toMatchObject({ status: 'cancelled', reason: 'cancelled', attempts: 0 });
  });

  it('ends work that outlives its timeout as failed (timeout), even when the handler ignores its signal', async () => {
    const done = await settled((await enqueue('stubborn')).id);
    expect(done.body).toMatchObject({ status: 'failed', reason: 'timeout' });
  });

  it('retries a failed attempt while attempts remain', async () => {
    const done = await settled((await enqueue('flaky')).id);
    expect(done.body).toMatchObject({ status: 'succeeded', attempts: 2, result: { attempts: 2 } });
  });

  it('keeps each organization to WORKER_ORG_CONCURRENCY: another organization’s work starts while one organization’s queue waits', async () => {
    const outsider = await t.outsider(`org-limit-${dialect}`);
    const ours = [];
    for (let i = 0; i < 4; i++) ours.push(await enqueue('sleep', { ms: 400 }));
    const theirs = await t.request('POST', '/api/worker/items', { token: outsider.token, body: { name: 'sleep', payload: { ms: 10 } } });
    const theirsDone = await until(() => t.request('GET', `/api/worker/items/${theirs.body.id}`, { token: outsider.token }), (r) => r.body.status === 'succeeded');
    expect(theirsDone.body.status, theirsDone.text).toBe('succeeded');
    // Default limit 2 per organization: the last of ours cannot have started before theirs ended.
    expect((await item(ours[3].id)).body.status).not.toBe('succeeded');
    for (const mine of ours) {
      const done = await settled(mine.id);
      expect(done.body.status, done.text).toBe('succeeded');
    }
    // One organization never reads another's work.
    expect((await t.request('GET', `/api/worker/items/${ours[0].id}`, { token: outsider.token })).status).toBe(404);
    expect((await t.request('POST', `/api/worker/items/${ours[0].id}/cancel`, { token: outsider.token })).status).toBe(404);
  });

  it('takes over the work of an instance that died: retried while attempts remain, else failed with reason lost', async () => {
    const { db } = t.kernel.storage;
    const past = new Date(Date.now() - 60_000).toISOString();
    const orphan = (kind: string, maxAttempts: number) =>
      db
        .insertInto('background_work')
        .values({ kind, org_id: 1, payload: t.kernel.storage.encodeJson(kind === 'worker.sleep' ? { ms: 1 } : null), status: 'running', attempts: 1, max_attempts: maxAttempts, timeout_ms: 60_000, run_after: past, lease_owner: 'a-dead-instance', lease_expires_at: past, cancel_requested: false, created_at: past, started_at: past })
        .returning('id')
        .executeTakeFirstOrThrow();
    const lost = await orphan('worker.sleep', 1);
    const retried = await orphan('worker.flaky', 2);
    expect((await settled(Number(lost.id))).body).toMatchObject({ status: 'failed', reason: 'lost' });
    const retriedDone = await settled(Number(retried.id));
    expect(retriedDone.body, retriedDone.text).toMatchObject({ status: 'succeeded', attempts: 2 });
  });

  it('hands running work back to the queue when the runner stops, and runs it after the restart', async () => {
    const queued = await enqueue('sleep', { ms: 20_000, steps: 100 });
    await until(() => item(queued.id), (r) => r.body.status === 'running');
    await t.kernel.work.stop(0);
    expect((await item(queued.id)).body).toMatchObject({ status: 'queued', attempts: 0 });
    await t.request('POST', `/api/worker/items/${queued.id}/cancel`); // so the restart does not wait 20 s
    await t.kernel.work.start();
    expect((await settled(queued.id)).body.status).toBe('cancelled');
  });

  it('drains a reloading plugin’s running work: handed back, and run by the new version', async () => {
    const queued = await enqueue('sleep', { ms: 1_500, steps: 15 });
    await until(() => item(queued.id), (r) => r.body.status === 'running');
    const manifest = path.join(plugins.dir, 'worker.json');
    fs.writeFileSync(manifest, JSON.stringify({ ...JSON.parse(fs.readFileSync(manifest, 'utf8')), version: '1.1.0' }));
    const reload = await t.request('POST', '/api/plugins/worker/reload');
    expect(reload.status, reload.text).toBe(200);
    const done = await settled(queued.id);
    expect(done.body).toMatchObject({ status: 'succeeded', result: { version: '1.1.0' } });
  });

  it('delivers an event after its transaction commits, never one rolled back, and redelivers until the subscriber succeeds', async () => {
    const before = (await t.request('GET', '/api/worker/events')).body.events.at(-1)?.id ?? 0;
    const rolledBack = await t.request('POST', '/api/worker/notes', { body: { text: 'never', roll_back: true } });
    expect(rolledBack.status).toBe(409);
    const kept = await t.request('POST', '/api/worker/notes', { body: { text: 'twice refused', fail_times: 2 } });
    expect(kept.status).toBe(201);
    const received = await until(() => t.request('GET', '/api/worker/received'), (r) => r.body.received.some((x: { event_id: number; attempt: number }) => x.event_id === kept.body.event_id && x.attempt === 3));
    const deliveries = received.body.received.filter((x: { event_id: number }) => x.event_id > before);
    expect(deliveries.map((x: { event_id: number; attempt: number }) => [x.event_id, x.attempt])).toEqual([
      [kept.body.event_id, 1],
      [kept.body.event_id, 2],
      [kept.body.event_id, 3],
    ]);
    expect(deliveries[0].payload).toEqual({ text: 'twice refused', fail_times: 2 });
    // Readable since an id, in the organization that published it only.
    const since = await t.request('GET', `/api/worker/events?after=${before}`);
    expect(since.body.events.map((e: { id: number }) => e.id)).toEqual([kept.body.event_id]);
    expect(since.body.events[0]).toMatchObject({ type: 'worker.noted', org_id: 1, publisher: 'worker' });
  });

  it('keeps events for a subscriber that is away and delivers them when it is back', async () => {
    const manifest = path.join(plugins.dir, 'worker.json');
    const original = fs.readFileSync(manifest, 'utf8');
    fs.writeFileSync(manifest, JSON.stringify({ ...JSON.parse(original), enabled: false }));
    await t.kernel.registry.syncFiles([manifest]);
    expect((await t.request('GET', '/api/plugins/worker')).body.state).toBe('disabled');
    // Published while the subscriber is unloaded (directly: its routes are gone too).
    const eventId = await t.kernel.storage.transaction((trx) =>
      trx.insertInto('event_outbox').values({ type: 'worker.noted', org_id: 1, payload: t.kernel.storage.encodeJson({ text: 'while away' }), publisher: 'test', created_at: t.kernel.storage.now() }).returning('id').executeTakeFirstOrThrow(),
    );
    fs.writeFileSync(manifest, JSON.stringify({ ...JSON.parse(original), version: '1.2.0' }));
    await t.kernel.registry.syncFiles([manifest]);
    const received = await until(() => t.request('GET', '/api/worker/received'), (r) => r.body.received.some((x: { event_id: number }) => x.event_id === Number(eventId.id)));
    expect(received.body.received.find((x: { event_id: number }) => x.event_id === Number(eventId.id))).toMatchObject({ subscriber: 'recorder@1.2.0', payload: { text: 'while away' } });
  });
});

describe.each(DIALECTS)('background work across instances (%s)', (dialect) => {
  let t: TestKernel;
  const plugins = tempDir('dp-third-party-');

  beforeAll(async () => {
    installWorkerPlugin(plugins.dir, { description: 'ticking' });
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), plugins.dir], env: FAST });
  });
  afterAll(async () => {
    await t?.stop();
    plugins.remove();
  });

  it('runs each item once and fires periodic work once per time, with two instances sharing the database', async () => {
    const peer = await t.peer();
    const ids: number[] = [];
    for (let i = 0; i < 16; i++) {
      const via = i % 2 ? peer : t;
      const res = await via.request('POST', '/api/worker/items', { body: { name: 'sleep', payload: { ms: 30 } } });
      ids.push(res.body.id);
    }
    for (const id of ids) await until(() => t.request('GET', `/api/worker/items/${id}`), (r) => r.body.status === 'succeeded');
    const runs = (await t.request('GET', '/api/worker/runs')).body.runs as { item_id: number; outcome: string }[];
    for (const id of ids) expect(runs.filter((r) => r.item_id === id && r.outcome === 'started')).toHaveLength(1);

    // Both instances fire the every-second timer; each fire time is one item, run once.
    await until(() => t.request('GET', '/api/worker/items?name=tick&status=succeeded'), (r) => r.body.items.length >= 3);
    const ticks = await t.kernel.storage.db.selectFrom('background_work').select(['id', 'dedupe_key']).where('kind', '=', 'worker.tick').execute();
    expect(new Set(ticks.map((x) => x.dedupe_key)).size).toBe(ticks.length);
    const tickRuns = ((await t.request('GET', '/api/worker/runs')).body.runs as { item_id: number; outcome: string }[]).filter((r) => r.outcome === 'tick');
    expect(new Set(tickRuns.map((r) => r.item_id)).size).toBe(tickRuns.length);
  });

  it('delivers each event once to a subscriber both instances run, whichever instance published it', async () => {
    const peer = await t.peer();
    const published: number[] = [];
    for (let i = 0; i < 6; i++) {
      const via = i % 2 ? peer : t;
      const res = await via.request('POST', '/api/worker/notes', { body: { text: `note ${i}` } });
      expect(res.status, res.text).toBe(201);
      published.push(res.body.event_id);
    }
    const received = await until(() => t.request('GET', '/api/worker/received'), (r) => published.every((id) => r.body.received.some((x: { event_id: number }) => x.event_id === id)));
    const deliveries = (received.body.received as { event_id: number }[]).filter((x) => published.includes(x.event_id));
    expect(deliveries.map((x) => x.event_id).sort((a, b) => a - b)).toEqual([...published].sort((a, b) => a - b));
  });
});
