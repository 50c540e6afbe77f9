import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratchDatabase, DIALECTS, REPO_ROOT, startTestKernel, tempDir, until, type TestKernel, type TestResponse } from '../harness/index.ts';
import { client, killAll, killHard, launch, serverSettings, type ServerProcess } from '../harness/server-process.ts';

const BASE = '/api/publishing/api-services';

interface UsageItem {
  key_id: number;
  key_name: string;
  endpoint: string | null;
  calls: number;
  errors: number;
  p50_ms: number;
  p99_ms: number;
  last_call_at: string;
}
interface Usage {
  since: string;
  until: string;
  items: UsageItem[];
  totals: { calls: number; errors: number };
}

const COLUMNS = [
  { name: 'id', type: 'integer' },
  { name: 'region', type: 'string' },
  { name: 'name', type: 'string' },
];
const ROWS = [
  { id: 1, region: 'EU', name: 'Ada' },
  { id: 2, region: 'US', name: 'Bob' },
];
/** A sql endpoint with a required parameter (a call without it is a 400) and a lookup by region. */
const endpoints = (datasetId: number) => [
  { name: 'by-region', kind: 'sql', config: { query: 'select id, name from customers where region = $1 order by id', params: [{ name: 'region', type: 'string', required: true }] } },
  { name: 'customer', kind: 'lookup', config: { dataset_id: datasetId, keys: ['region'], columns: ['id', 'name'] } },
];

describe.each(DIALECTS)('API Service usage (%s)', (dialect) => {
  let t: TestKernel;
  let serviceId: number;
  let keyA: { id: number; key: string };
  let keyB: { id: number; key: string };
  let startedAt: number;
  let usage: Usage;

  const call = (key: string, endpoint: string, query = '') => t.request('GET', `/api/service/usage-shop/${endpoint}${query}`, { token: null, headers: { 'x-api-key': key } });
  const read = (query = '', token?: string) => t.request<Usage>('GET', `${BASE}/${serviceId}/usage${query}`, { token });
  const item = (keyId: number, endpoint: string | null) => usage.items.find((i) => i.key_id === keyId && i.endpoint === endpoint);
  const expectField = (res: TestResponse, path: string) => {
    expect(res.status, res.text).toBe(400);
    expect(res.body.errors?.map((e: { path: string }) => e.path), res.text).toContain(path);
  };

  beforeAll(async () => {
    // Flushed every 50 ms: a test polls the usage route until the counts are there.
    t = await startTestKernel({ dialect, env: { API_USAGE_FLUSH_MS: '50' } });
    const projectId = (await t.request('POST', '/api/projects', { body: { key: 'USAGE', name: 'Usage' } })).body.id;
    const dataset = await t.request('POST', '/api/datasets', { body: { name: 'customers', project_id: projectId, columns: COLUMNS } });
    expect(dataset.status, dataset.text).toBe(201);
    expect((await t.request('POST', `/api/datasets/${dataset.body.id}/rows`, { body: ROWS })).status).toBe(200);
    const service = await t.request('POST', BASE, { body: { project_id: projectId, name: 'Usage shop', key: 'usage-shop', endpoints: endpoints(dataset.body.id) } });
    expect(service.status, service.text).toBe(201);
    serviceId = service.body.id;
    expect((await t.request('POST', `${BASE}/${serviceId}/publish`)).status).toBe(200);
    const mint = async (body: Record<string, unknown>) => {
      const res = await t.request('POST', `${BASE}/${serviceId}/keys`, { body });
      expect(res.status, res.text).toBe(201);
      return res.body as { id: number; key: string };
    };
    keyA = await mint({ name: 'partner-a' });
    keyB = await mint({ name: 'partner-b', allowed_endpoints: ['customer'], rate_limit_per_min: 4 });

    startedAt = Date.now();
    const expectStatus = async (status: number, res: Promise<TestResponse>) => {
      const answer = await res;
      expect(answer.status, answer.text).toBe(status);
    };
    for (let i = 0; i < 3; i++) await expectStatus(200, call(keyA.key, 'by-region', '?region=EU'));
    await expectStatus(400, call(keyA.key, 'by-region'));
    for (let i = 0; i < 2; i++) await expectStatus(200, call(keyA.key, 'customer', '?region=EU'));
    for (let i = 0; i < 4; i++) await expectStatus(200, call(keyB.key, 'customer', '?region=US'));
    await expectStatus(429, call(keyB.key, 'customer', '?region=US'));
    await expectStatus(403, call(keyB.key, 'by-region', '?region=EU'));
    await expectStatus(403, call(keyB.key, 'no-such-endpoint'));
    await expectStatus(404, call(keyA.key, 'no-such-endpoint'));
    // Not counted: a key that does not authenticate, a service that is not there.
    await expectStatus(401, call('dpk_unknown', 'by-region', '?region=EU'));
    await expectStatus(404, t.request('GET', '/api/service/no-such-service/customer?region=EU', { token: null, headers: { 'x-api-key': keyA.key } }));

    const answer = await until(read, (res) => res.status !== 200 || res.body.totals.calls >= 14);
    expect(answer.status, answer.text).toBe(200);
    usage = answer.body;
  }, 60_000);
  afterAll(async () => t?.stop());

  it('counts calls and errors (400, 403, 404, 429) per key and endpoint', () => {
    expect(usage.totals).toEqual({ calls: 14, errors: 5 });
    const counts = usage.items.map((i) => [i.key_name, i.endpoint, i.calls, i.errors]);
    expect(counts).toEqual([
      ['partner-a', null, 1, 1],
      ['partner-a', 'by-region', 4, 1],
      ['partner-a', 'customer', 2, 0],
      ['partner-b', null, 1, 1],
      ['partner-b', 'by-region', 1, 1],
      ['partner-b', 'customer', 5, 1],
    ]);
    expect(item(keyA.id, 'by-region')?.key_id).toBe(keyA.id);
  });

  it('answers latency percentiles from the histogram (p50 ≤ p99) and the last call', () => {
    for (const line of usage.items) {
      expect(line.p50_ms, JSON.stringify(line)).toBeGreaterThan(0);
      expect(line.p50_ms, JSON.stringify(line)).toBeLessThanOrEqual(line.p99_ms);
      expect(line.p99_ms).toBeLessThan(10_000);
      const last = Date.parse(line.last_call_at);
      expect(last).toBeGreaterThanOrEqual(startedAt - 1);
      expect(last).toBeLessThanOrEqual(Date.now());
    }
    expect(Date.parse(usage.until) - Date.parse(usage.since)).toBeGreaterThanOrEqual(24 * 3600_000);
    expect(Date.parse(usage.since) % 60_000).toBe(0);
  });

  it('reads a window: since in the future or until before the calls is empty; since is rounded down to its minute', async () => {
    const future = new Date(Date.now() + 3600_000).toISOString();
    const later = await read(`?since=${future}`);
    expect(later.status, later.text).toBe(200);
    expect(later.body).toMatchObject({ items: [], totals: { calls: 0, errors: 0 } });
    const before = await read(`?until=${new Date(startedAt - 120_000).toISOString()}`);
    expect(before.body).toMatchObject({ items: [], totals: { calls: 0, errors: 0 } });
    const since = new Date(startedAt).toISOString();
    const window = await read(`?since=${encodeURIComponent(since.replace('Z', '+00:00'))}&until=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`);
    expect(window.status, window.text).toBe(200);
    expect(window.body.totals).toEqual({ calls: 14, errors: 5 });
    expect(window.body.since).toBe(new Date(startedAt - (startedAt % 60_000)).toISOString());
  });

  it('refuses a bad since or until with a 400 naming it, hostile ones included', async () => {
    for (const bad of ['yesterday', '2026-13-01T00:00:00Z', "2026-01-01' or '1'='1", '2026-01-01T00:00:00Z; drop table publishing_usage --', '/* */2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z\u0000', '9'.repeat(8_000)]) {
      expectField(await read(`?since=${encodeURIComponent(bad)}`), 'query.since');
    }
    expectField(await read('?until=tomorrow'), 'query.until');
    expectField(await read('?since=2026-01-01T00:00:00Z&since=2026-01-02T00:00:00Z'), 'query.since');
    // Names of Object.prototype in the query string are no inputs of this route; `__proto__` is
    // refused on every route, as in a body.
    const proto = await read('?constructor=y&toString=z&since=2000-01-01T00:00:00Z');
    expect(proto.status, proto.text).toBe(200);
    expect(proto.body.totals).toEqual({ calls: 14, errors: 5 });
    expectField(await read('?__proto__=x&since=2000-01-01T00:00:00Z'), 'query.__proto__');
  });

  it('is read with publishing.read (a viewer), and another organization’s service is not there (404)', async () => {
    const viewer = await t.userToken('viewer');
    const viewed = await read('', viewer.token);
    expect(viewed.status, viewed.text).toBe(200);
    expect(viewed.body.totals.calls).toBe(14);
    const outsider = await t.outsider('usage-outsider');
    const theirs = await read('', outsider.token);
    expect(theirs.status, theirs.text).toBe(404);
    expect(theirs.text).not.toContain('partner-a');
    expect((await t.request('GET', `${BASE}/999999/usage`)).status).toBe(404);
  });

  it('adds the counts of two instances sharing the database', async () => {
    const keyC = (await t.request('POST', `${BASE}/${serviceId}/keys`, { body: { name: 'partner-c' } })).body;
    const peer = await t.peer();
    for (const request of [t.request, peer.request, t.request, peer.request]) {
      const res = await request('GET', '/api/service/usage-shop/customer?region=EU', { token: null, headers: { 'x-api-key': keyC.key } });
      expect(res.status, res.text).toBe(200);
    }
    const both = await until(read, (res) => res.body.totals?.calls === 18);
    expect(both.body.items.filter((i) => i.key_id === keyC.id).map((i) => [i.endpoint, i.calls, i.errors])).toEqual([['customer', 4, 0]]);
  });

  it('deletes the minutes older than API_USAGE_RETENTION_DAYS (90), each instance at its first flush', async () => {
    const DAY = 86_400_000;
    const minuteOf = (ms: number) => ms - (ms % 60_000);
    const old = minuteOf(Date.now() - 100 * DAY);
    const recent = minuteOf(Date.now() - 10 * DAY);
    await t.kernel.storage.db
      .insertInto('publishing_usage')
      .values([old, recent].map((minute, i) => ({ service_id: serviceId, minute, key_id: keyA.id, endpoint: 'customer', bucket: 0, calls: 1000 + i, errors: 0, last_call_at: minute })))
      .execute();
    const window = () => read(`?since=${new Date(Date.now() - 200 * DAY).toISOString()}`);
    const before = (await window()).body.totals.calls;
    // A new instance prunes at its first flush (this one did at its own, before the rows were there).
    await t.peer();
    const after = await until(window, (res) => res.body.totals.calls === before - 1000);
    expect(after.body.totals.calls, after.text).toBe(before - 1000);
    const rows = await t.kernel.storage.db.selectFrom('publishing_usage').select('minute').where('service_id', '=', serviceId).where('minute', '<', minuteOf(Date.now() - DAY)).execute();
    expect(rows.map((row) => Number(row.minute))).toEqual([recent]);
  });

  it('goes with its service: deleting the service deletes its usage', async () => {
    const projectId = (await t.request('POST', '/api/projects', { body: { key: 'GONE', name: 'Gone' } })).body.id;
    const service = await t.request('POST', BASE, { body: { project_id: projectId, name: 'Gone', key: 'usage-gone', endpoints: [{ name: 'f', kind: 'function', config: {} }] } });
    expect((await t.request('POST', `${BASE}/${service.body.id}/publish`)).status).toBe(200);
    const key = (await t.request('POST', `${BASE}/${service.body.id}/keys`, { body: { name: 'gone' } })).body.key;
    expect((await t.request('GET', '/api/service/usage-gone/f', { token: null, headers: { 'x-api-key': key } })).status).toBe(501);
    const counted = await until(
      () => t.request<Usage>('GET', `${BASE}/${service.body.id}/usage`),
      (res) => res.body.totals?.calls === 1,
    );
    expect(counted.body.items).toEqual([expect.objectContaining({ endpoint: 'f', calls: 1, errors: 1 })]);
    expect((await t.request('DELETE', `${BASE}/${service.body.id}`)).status).toBe(204);
    const rows = await t.kernel.storage.db.selectFrom('publishing_usage').select('service_id').where('service_id', '=', service.body.id).execute();
    expect(rows).toEqual([]);
  });
});

/**
 * Usage across restarts, with real server processes: a graceful stop (SIGTERM) writes what was
 * counted since the last flush, and nothing flushed is lost by a crash (SIGKILL).
 */
describe.each(DIALECTS)('API Service usage across restarts (%s)', (dialect) => {
  const temp = tempDir('dp-usage-restart-');
  const live: ServerProcess[] = [];
  let database: Awaited<ReturnType<typeof createScratchDatabase>>;
  let env: Record<string, string>;
  let token: string;

  const start = async (flushMs: number) => {
    const server = await launch({ ...env, API_USAGE_FLUSH_MS: String(flushMs) }, live);
    return { server, api: client(server.url, token) };
  };
  const call = (url: string, key: string) => fetch(`${url}/api/service/restart-shop/customer?region=EU`, { headers: { 'x-api-key': key } });
  const totals = async (api: ReturnType<typeof client>, serviceId: number) => (await api('GET', `${BASE}/${serviceId}/usage`)).body.totals;

  beforeAll(async () => {
    database = await createScratchDatabase(dialect, temp.dir);
    ({ env, token } = await serverSettings(temp.dir, database.url, [path.join(REPO_ROOT, 'manifests')]));
  });
  afterAll(async () => {
    await killAll(live);
    await database?.drop();
    temp.remove();
  });

  it('keeps what a graceful stop flushed and what was flushed before a crash', { timeout: 120_000 }, async () => {
    // A flush interval no test waits for: only the stop writes the counts.
    const first = await start(3_600_000);
    const projectId = (await first.api('POST', '/api/projects', { key: 'RESTART', name: 'Restart' })).body.id;
    const dataset = (await first.api('POST', '/api/datasets', { name: 'customers', project_id: projectId, columns: COLUMNS })).body.id;
    expect((await first.api('POST', `/api/datasets/${dataset}/rows`, ROWS)).status).toBe(200);
    const serviceId = (await first.api('POST', BASE, { project_id: projectId, name: 'Restart shop', key: 'restart-shop', endpoints: endpoints(dataset) })).body.id;
    expect((await first.api('POST', `${BASE}/${serviceId}/publish`)).status).toBe(200);
    const key = (await first.api('POST', `${BASE}/${serviceId}/keys`, { name: 'restart' })).body.key;
    for (let i = 0; i < 3; i++) expect((await call(first.server.url, key)).status).toBe(200);
    expect(await totals(first.api, serviceId)).toEqual({ calls: 0, errors: 0 });
    process.kill(-first.server.proc.pid!, 'SIGTERM');
    await first.server.gone;

    const second = await start(50);
    expect(await totals(second.api, serviceId)).toEqual({ calls: 3, errors: 0 });
    for (let i = 0; i < 2; i++) expect((await call(second.server.url, key)).status).toBe(200);
    const flushed = await until(() => totals(second.api, serviceId), (t) => t.calls === 5);
    expect(flushed).toEqual({ calls: 5, errors: 0 });
    await killHard(second.server);

    const third = await start(50);
    expect(await totals(third.api, serviceId)).toEqual({ calls: 5, errors: 0 });
  });
});
