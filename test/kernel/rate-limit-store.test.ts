import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSettings } from '../../kernel/config.ts';
import { DatabaseRateLimitStore, RATE_LIMIT_TABLE } from '../../kernel/rate-limit/database-rate-limit-store.ts';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

const LIMIT = 6;

async function mintToken(t: TestKernel, name: string): Promise<string> {
  const res = await t.request<{ token: string }>('POST', '/api/auth/tokens', { body: { name } });
  expect(res.status, res.text).toBe(201);
  return res.body.token;
}

describe.each(DIALECTS)('rate-limit counters shared through the database (%s)', (dialect) => {
  let t: TestKernel;
  let peer: Awaited<ReturnType<TestKernel['peer']>>;
  beforeAll(async () => {
    // On Postgres the database store is the default; SQLite names it (one file, shared by both kernels here).
    const store: Record<string, string> = dialect === 'postgres' ? {} : { RATE_LIMIT_STORE: 'database' };
    t = await startTestKernel({ dialect, env: { PAT_RATE_LIMIT_PER_MIN: String(LIMIT), ...store } });
    peer = await t.peer();
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('two instances spend one budget: a token over its rate is refused by either', async () => {
    const token = await mintToken(t, 'shared-budget');
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT; i++) statuses.push((await (i % 2 ? peer : t).request('GET', '/api/me', { token })).status);
    expect(statuses).toEqual(Array(LIMIT).fill(200));
    for (const instance of [t, peer]) {
      const refused = await instance.request('GET', '/api/me', { token });
      expect(refused.status).toBe(429);
      expect(refused.headers.get('content-type')).toMatch(/application\/problem\+json/);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(refused.body.detail).toBe(`this token made more than ${LIMIT} requests in a minute`);
    }
  });

  it('grants exactly the budget to concurrent requests on both instances', async () => {
    const token = await mintToken(t, 'concurrent-budget');
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => (i % 2 ? peer : t).request('GET', '/api/me', { token })));
    expect(answers.filter((a) => a.status === 200).length).toBe(LIMIT);
    expect(answers.filter((a) => a.status === 429).length).toBe(24 - LIMIT);
  });

  it('refills as time passes and sweeps the buckets that are full again', async () => {
    let now = 1_000_000;
    const store = new DatabaseRateLimitStore(t.kernel.storage, () => now);
    const rows = async (key: string) => (await t.kernel.storage.db.selectFrom(RATE_LIMIT_TABLE).select('key').where('key', '=', key).execute()).length;
    expect(await store.take('test:a', 2, 1000)).toEqual({ allowed: true, retryAfterMs: 0 });
    expect(await store.take('test:a', 2, 1000)).toEqual({ allowed: true, retryAfterMs: 0 });
    expect(await store.take('test:a', 2, 1000)).toEqual({ allowed: false, retryAfterMs: 500 });
    now += 250; // half a token back: still refused, a quarter of the window to go
    expect(await store.take('test:a', 2, 1000)).toEqual({ allowed: false, retryAfterMs: 250 });
    now += 250;
    expect((await store.take('test:a', 2, 1000)).allowed).toBe(true);
    // A clock behind the stored one (another instance's) refills nothing.
    now -= 10_000;
    expect((await store.take('test:a', 2, 1000)).allowed).toBe(false);
    now += 10_000;
    expect(await rows('test:a')).toBe(1);
    now += 61_000; // full again long ago, and the sweep is due
    await store.take('test:b', 2, 1000);
    expect(await rows('test:a')).toBe(0);
    expect(await rows('test:b')).toBe(1);
  });
});

describe('RATE_LIMIT_STORE', () => {
  const base = { ADMIN_PASSWORD: 'admin-password-1' };
  it('defaults to the database on Postgres and to memory on SQLite', () => {
    expect(loadSettings({ ...base, DATABASE_URL: 'postgres://db.example/platform' }).RATE_LIMIT_STORE).toBe('database');
    expect(loadSettings({ ...base, DATABASE_URL: 'postgresql://db.example/platform' }).RATE_LIMIT_STORE).toBe('database');
    expect(loadSettings({ ...base, DATABASE_URL: 'sqlite:/tmp/x.db' }).RATE_LIMIT_STORE).toBe('memory');
    expect(loadSettings(base).RATE_LIMIT_STORE).toBe('memory');
    expect(loadSettings({ ...base, DATABASE_URL: 'postgres://db.example/platform', RATE_LIMIT_STORE: 'memory' }).RATE_LIMIT_STORE).toBe('memory');
  });

  it('refuses another value, naming the setting', () => {
    expect(() => loadSettings({ ...base, RATE_LIMIT_STORE: 'redis' })).toThrow(/invalid setting RATE_LIMIT_STORE/);
  });
});
