import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { REPO_ROOT, startTestKernel, tempDir, until, writeManifest, type TestKernel, type TestResponse } from '../harness/index.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));


const withRepoManifests = (dir: string) => [path.join(REPO_ROOT, 'manifests'), dir];

async function openapiPaths(t: TestKernel): Promise<string[]> {
  const res = await t.request('GET', '/openapi.json', { token: null });
  expect(res.status).toBe(200);
  return Object.keys(res.body.paths);
}

describe.each(DIALECTS)('hot reload (%s)', (dialect) => {
  describe('watched manifest folder', () => {
    let t: TestKernel;
    const manifests = tempDir();
    const file = path.join(manifests.dir, 'watched.json');
    const writeWatched = (version: string) => writeManifest(manifests.dir, { id: 'watched', version, router: { prefix: '/api/watched', tag: 'watched' } }, 'probe');
    const watchedStatus = () => t.request('GET', '/api/plugins/watched');

    beforeAll(async () => {
      t = await startTestKernel({ dialect, manifestDirs: withRepoManifests(manifests.dir), env: { PLUGIN_WATCH: 'true' } });
    });
    afterAll(async () => {
      await t?.stop();
      manifests.remove();
    });

    it('loads a manifest added to the folder: its routes and OpenAPI paths appear', async () => {
      expect((await t.request('GET', '/api/watched', { token: null })).status).toBe(404);
      expect(await openapiPaths(t)).not.toContain('/api/watched');
      expect(writeWatched('1.0.0')).toBe(file);
      const res = await until(() => t.request('GET', '/api/watched', { token: null }), (r) => r.status === 200);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ plugin: 'watched', version: '1.0.0' });
      expect(await openapiPaths(t)).toEqual(expect.arrayContaining(['/api/watched', '/api/watched/slow', '/api/watched/items/{item_id}']));
      expect((await watchedStatus()).body).toMatchObject({ state: 'loaded', version: '1.0.0', manifest_file: file, last_reload_error: null });
    });

    it('reloads a changed manifest: the new version serves', async () => {
      writeWatched('1.1.0');
      const res = await until(() => t.request('GET', '/api/watched', { token: null }), (r) => r.body?.version === '1.1.0');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ plugin: 'watched', version: '1.1.0' });
      expect((await watchedStatus()).body).toMatchObject({ state: 'loaded', version: '1.1.0' });
    });

    it('keeps the live version when an invalid manifest is written over it, and says why', async () => {
      fs.writeFileSync(file, '{ "id": "watched", "version": ');
      const status = await until(watchedStatus, (r) => r.body?.last_reload_error != null);
      expect(status.status).toBe(200);
      expect(status.body).toMatchObject({ state: 'loaded', version: '1.1.0', reason: null });
      expect(status.body.last_reload_error).toContain(file);
      expect(status.body.last_reload_error).toMatch(/not valid JSON/);
      expect((await t.request('GET', '/api/watched', { token: null })).body).toEqual({ plugin: 'watched', version: '1.1.0' });

      // Valid JSON, invalid field: the error follows the newest attempt.
      fs.writeFileSync(file, JSON.stringify({ id: 'watched', version: 'one', kind: 'router', entry: 'x.ts', router: { prefix: '/api/watched', tag: 'watched' } }));
      const again = await until(watchedStatus, (r) => /field version/.test(r.body?.last_reload_error ?? ''));
      expect(again.body.last_reload_error).toMatch(/field version: must be a semantic version/);
      expect(again.body).toMatchObject({ state: 'loaded', version: '1.1.0' });
      expect((await t.request('GET', '/api/watched', { token: null })).body).toEqual({ plugin: 'watched', version: '1.1.0' });
      expect(await openapiPaths(t)).toContain('/api/watched');
    });

    it('clears last_reload_error once the manifest is valid again', async () => {
      writeWatched('1.2.0');
      const res = await until(() => t.request('GET', '/api/watched', { token: null }), (r) => r.body?.version === '1.2.0');
      expect(res.body).toEqual({ plugin: 'watched', version: '1.2.0' });
      expect((await watchedStatus()).body).toMatchObject({ state: 'loaded', version: '1.2.0', last_reload_error: null });
    });

    it('clears last_reload_error when the broken manifest is put back exactly as the live version has it', async () => {
      const good = fs.readFileSync(file, 'utf8');
      fs.writeFileSync(file, '{ broken');
      expect((await until(watchedStatus, (r) => r.body?.last_reload_error != null)).body.last_reload_error).toMatch(/not valid JSON/);
      fs.writeFileSync(file, good);
      const status = await until(watchedStatus, (r) => r.body?.last_reload_error === null);
      expect(status.body).toMatchObject({ state: 'loaded', version: '1.2.0', last_reload_error: null });
    });

    it('unloads a deleted manifest: its routes answer 404 and leave /openapi.json', async () => {
      fs.unlinkSync(file);
      const res = await until(() => t.request('GET', '/api/watched', { token: null }), (r) => r.status === 404);
      expect(res.status).toBe(404);
      expect((await t.request('GET', '/api/watched/slow?ms=1', { token: null })).status).toBe(404);
      expect((await openapiPaths(t)).filter((p) => p.startsWith('/api/watched'))).toEqual([]);
      expect((await watchedStatus()).status).toBe(404);
      expect((await t.request('GET', '/api/plugins')).status).toBe(200);
    });
  });

  describe('reload on demand', () => {
    let t: TestKernel;
    const manifests = tempDir();
    let probeVersion = 0;
    /** Writes the probe manifest with the next patch version and returns it. */
    const bumpProbe = () => {
      const version = `1.0.${++probeVersion}`;
      writeManifest(manifests.dir, { id: 'probe', version, router: { prefix: '/api/probe', tag: 'probe' } }, 'probe');
      return version;
    };
    const reload = (id: string) => t.request('POST', `/api/plugins/${id}/reload`);
    const probeVersionServed = async () => (await t.request('GET', '/api/probe', { token: null })).body.version as string;

    beforeAll(async () => {
      bumpProbe();
      writeManifest(manifests.dir, { id: 'greeter', router: { prefix: '/api/greeter', tag: 'greeter' } }, 'provider');
      writeManifest(manifests.dir, { id: 'a-contributor', kind: 'extension', depends_on: ['greeter'], description: 'hello from a' }, 'contributor');
      t = await startTestKernel({ dialect, manifestDirs: withRepoManifests(manifests.dir) });
    });
    afterAll(async () => {
      await t?.stop();
      manifests.remove();
    });

    it('reloads an edited manifest: 200 and the new version serves', async () => {
      expect(await probeVersionServed()).toBe('1.0.1');
      const version = bumpProbe();
      // Without a reload (watching is off) the old version keeps serving.
      expect(await probeVersionServed()).toBe('1.0.1');
      const res = await reload('probe');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: 'probe', state: 'loaded', version, last_reload_error: null });
      expect(await probeVersionServed()).toBe(version);
      expect(await openapiPaths(t)).toContain('/api/probe/slow');
    });

    it('answers 422 and keeps the previous version when the new manifest is invalid', async () => {
      const live = await probeVersionServed();
      const file = path.join(manifests.dir, 'probe.json');
      const good = fs.readFileSync(file, 'utf8');
      fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(good), version: 'not-semver' }));
      const res = await reload('probe');
      expect(res.status).toBe(422);
      expect(res.body.detail).toMatch(/reload of plugin "probe" failed: .*field version: must be a semantic version/);
      expect(await probeVersionServed()).toBe(live);
      const status = await t.request('GET', '/api/plugins/probe');
      expect(status.body).toMatchObject({ state: 'loaded', version: live });
      expect(status.body.last_reload_error).toMatch(/field version/);
      fs.writeFileSync(file, good);
      const restored = await reload('probe');
      expect(restored.status).toBe(200);
      expect(restored.body).toMatchObject({ version: live, last_reload_error: null });
    });

    it('lets a request in flight finish on the version that took it', async () => {
      const old = await probeVersionServed();
      let slowDone = false;
      const slow = t.request('GET', '/api/probe/slow?ms=1500', { token: null }).finally(() => (slowDone = true));
      await sleep(300); // the slow request is routed by now
      const version = bumpProbe();
      const res = await reload('probe');
      expect(res.status).toBe(200);
      expect(res.body.version).toBe(version);
      // The new version serves while the old one still has the slow request in flight.
      expect(await probeVersionServed()).toBe(version);
      expect(slowDone).toBe(false);
      const finished = await slow;
      expect(finished.status).toBe(200);
      expect(finished.body).toEqual({ plugin: 'probe', version: old });
      expect(await probeVersionServed()).toBe(version);
    });

    it('fails no request while the plugin is reloaded under concurrent load', async () => {
      const WORKERS = 8;
      const MAX_PER_WORKER = 400;
      const HARD_DEADLINE = Date.now() + 15_000;
      const failures: { path: string; status: number; text: string }[] = [];
      const versionsSeen = new Set<string>();
      let total = 0;
      let stop = false;

      const worker = async (n: number) => {
        for (let i = 0; i < MAX_PER_WORKER && !stop && Date.now() < HARD_DEADLINE; i++) {
          const route = (n + i) % 2 === 0 ? '/api/probe' : '/api/probe/slow?ms=50';
          let res: TestResponse;
          try {
            res = await t.request('GET', route, { token: null });
          } catch (err) {
            failures.push({ path: route, status: 0, text: (err as Error).message });
            continue;
          } finally {
            total += 1;
          }
          if (res.status !== 200) failures.push({ path: route, status: res.status, text: res.text });
          else versionsSeen.add(res.body.version);
        }
      };

      const load = Array.from({ length: WORKERS }, (_, n) => worker(n));
      const reloads: { version: string; status: number; detail?: string }[] = [];
      const started = Date.now();
      try {
        await sleep(100);
        for (let i = 0; i < 10 && Date.now() < HARD_DEADLINE; i++) {
          const version = bumpProbe();
          const res = await reload('probe');
          reloads.push({ version, status: res.status, detail: res.body?.detail });
          await sleep(250);
        }
        // Keep the load on for ~3 s in all, so the last versions are retired under load too.
        while (Date.now() - started < 3_000) await sleep(50);
      } finally {
        stop = true;
        await Promise.all(load);
      }

      expect(reloads).toHaveLength(10);
      expect(reloads.filter((r) => r.status !== 200)).toEqual([]);
      expect(failures).toEqual([]);
      expect(total).toBeGreaterThan(100);
      expect(versionsSeen.size).toBeGreaterThan(2);
      expect(await probeVersionServed()).toBe(reloads.at(-1)!.version);
    });

    it('reloads the dependents of a reloaded provider: the contribution is still listed', async () => {
      const before = (await t.request('GET', '/api/plugins/a-contributor')).body;
      expect(before.state).toBe('loaded');
      expect((await t.request('GET', '/api/greeter', { token: null })).body).toEqual({ 'a-contributor': 'hello from a' });
      writeManifest(manifests.dir, { id: 'greeter', version: '1.1.0', router: { prefix: '/api/greeter', tag: 'greeter' } }, 'provider');
      await sleep(5); // loaded_at has millisecond resolution
      const res = await reload('greeter');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: 'greeter', version: '1.1.0', state: 'loaded' });
      const after = (await t.request('GET', '/api/plugins/a-contributor')).body;
      expect(after.state).toBe('loaded');
      expect(Date.parse(after.loaded_at)).toBeGreaterThan(Date.parse(before.loaded_at));
      // Also once the replaced versions have been disposed.
      await sleep(200);
      const listed = await t.request('GET', '/api/greeter', { token: null });
      expect(listed.status).toBe(200);
      expect(listed.body).toEqual({ 'a-contributor': 'hello from a' });
    });

    it('keeps a contribution listed when only its contributor reloads', async () => {
      writeManifest(manifests.dir, { id: 'a-contributor', version: '1.0.1', kind: 'extension', depends_on: ['greeter'], description: 'hello again from a' }, 'contributor');
      const res = await reload('a-contributor');
      expect(res.status).toBe(200);
      await sleep(200); // the replaced version has been drained and disposed by now
      expect((await t.request('GET', '/api/greeter', { token: null })).body).toEqual({ 'a-contributor': 'hello again from a' });
    });
  });
});
