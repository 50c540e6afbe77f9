import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { startTestKernel, tempDir, writeManifest, type TestKernel } from '../harness/index.ts';

describe.each(DIALECTS)('smoke (%s)', (dialect) => {
  let t: TestKernel;
  const manifests = tempDir();
  beforeAll(async () => {
    writeManifest(manifests.dir, { id: 'probe', router: { prefix: '/api/probe', tag: 'probe' } }, 'probe');
    writeManifest(manifests.dir, { id: 'migrating', router: { prefix: '/api/migrating', tag: 'migrating' } }, 'migrating');
    t = await startTestKernel({ dialect, manifestDirs: [manifests.dir] });
  });
  afterAll(async () => {
    await t?.stop();
    manifests.remove();
  });

  it('serves a plugin route', async () => {
    const res = await t.request('GET', '/api/probe');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ plugin: 'probe', version: '1.0.0' });
  });

  it('round-trips JSON and booleans through a plugin table', async () => {
    const created = await t.request('POST', '/api/migrating', { body: { text: 'a', data: { nested: [1, 2] }, done: true } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ text: 'a', data: { nested: [1, 2] }, done: true });
    const list = await t.request('GET', '/api/migrating');
    expect(list.body).toEqual([{ id: created.body.id, text: 'a', data: { nested: [1, 2] }, done: true }]);
  });
});
