import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { REPO_ROOT, startTestKernel, tempDir, writeManifest, type TestKernel } from '../harness/index.ts';
import type { PluginStatus } from '../../kernel/plugin-api.ts';

/** The repository's manifests (the `plugins` router lives there) plus a test's own folder. */
const withRepoManifests = (dir: string) => [path.join(REPO_ROOT, 'manifests'), dir];

/** Writes a manifest under a file name of our choosing (writeManifest names the file after the id). */
function writeManifestAs(dir: string, fileName: string, manifest: Record<string, unknown> & { id: string }, fixture: string): string {
  const file = path.join(dir, fileName);
  fs.renameSync(writeManifest(dir, manifest, fixture), file); // same folder: the relative entry stays right
  return file;
}

type Status = PluginStatus;

async function statuses(t: TestKernel): Promise<Status[]> {
  const res = await t.request<Status[]>('GET', '/api/plugins');
  expect(res.status).toBe(200);
  return res.body;
}

async function statusOf(t: TestKernel, id: string): Promise<Status> {
  const res = await t.request<Status>('GET', `/api/plugins/${encodeURIComponent(id)}`);
  expect(res.status, `GET /api/plugins/${id}: ${res.text}`).toBe(200);
  return res.body;
}

describe.each(DIALECTS)('plugin loading (%s)', (dialect) => {
  describe('bad manifests and failing plugins are skipped; the rest keeps serving', () => {
    let t: TestKernel;
    const manifests = tempDir();
    const files: Record<string, string> = {};
    beforeAll(async () => {
      const dir = manifests.dir;
      writeManifest(dir, { id: 'probe', router: { prefix: '/api/probe', tag: 'probe' } }, 'probe');
      files.badJson = path.join(dir, 'bad-json.json');
      fs.writeFileSync(files.badJson, '{ "id": "bad-json", "version": ');
      files.noVersion = writeManifest(dir, { id: 'no-version', version: undefined, router: { prefix: '/api/no-version', tag: 'x' } }, 'probe');
      files.unknownField = writeManifest(dir, { id: 'unknown-field', kind: 'extension', colour: 'blue' }, 'recipes');
      files.unknownNested = writeManifest(dir, { id: 'unknown-nested', router: { prefix: '/api/unknown-nested', tag: 'x', cache: true } }, 'probe');
      files.badId = writeManifest(dir, { id: 'BadId', kind: 'extension' }, 'recipes');
      files.brokenImport = writeManifest(dir, { id: 'broken-import', kind: 'extension' }, 'broken-import');
      files.notAPlugin = writeManifest(dir, { id: 'not-a-plugin', kind: 'extension' }, 'not-a-plugin');
      files.failingInit = writeManifest(dir, { id: 'failing-init', kind: 'extension' }, 'failing-init');
      files.slowInit = writeManifest(dir, { id: 'slow-init', kind: 'extension' }, 'slow-init');
      // Supported kernel versions: a range this kernel is outside of (its init would throw, were it run), one it meets, one that is no range.
      writeManifest(dir, { id: 'future-kernel', kind: 'extension', kernel: '>=1.0.0' }, 'failing-init');
      writeManifest(dir, { id: 'current-kernel', kernel: '^0.1.0', router: { prefix: '/api/current-kernel', tag: 'probe' } }, 'probe');
      writeManifest(dir, { id: 'bad-range', kind: 'extension', kernel: 'banana' }, 'recipes');
      t = await startTestKernel({ dialect, manifestDirs: withRepoManifests(dir), env: { PLUGIN_INIT_TIMEOUT_MS: '300' } });
    });
    afterAll(async () => {
      await t?.stop();
      manifests.remove();
    });

    it('reports invalid JSON with the file', async () => {
      const s = await statusOf(t, 'bad-json');
      expect(s.state).toBe('failed');
      expect(s.manifest_file).toBe(files.badJson);
      expect(s.reason).toContain(files.badJson);
      expect(s.reason).toMatch(/not valid JSON/);
      expect(s.version).toBeNull();
    });

    it('reports a missing field with the file and the field', async () => {
      const s = await statusOf(t, 'no-version');
      expect(s.state).toBe('failed');
      expect(s.reason).toContain(files.noVersion);
      expect(s.reason).toMatch(/field version:/);
    });

    it('reports an unknown field with the file and the field', async () => {
      const top = await statusOf(t, 'unknown-field');
      expect(top.state).toBe('failed');
      expect(top.reason).toContain(files.unknownField);
      expect(top.reason).toMatch(/colour/);
      const nested = await statusOf(t, 'unknown-nested');
      expect(nested.state).toBe('failed');
      expect(nested.reason).toContain(files.unknownNested);
      expect(nested.reason).toMatch(/field router:.*cache/);
      expect((await t.request('GET', '/api/unknown-nested')).status).toBe(404);
    });

    it('reports a bad id with the file and the field', async () => {
      const s = await statusOf(t, 'BadId');
      expect(s.state).toBe('failed');
      expect(s.reason).toContain(files.badId);
      expect(s.reason).toMatch(/field id: must be lower-case words/);
    });

    it('reports an entry that cannot be imported', async () => {
      const s = await statusOf(t, 'broken-import');
      expect(s).toMatchObject({ state: 'failed', version: '1.0.0', kind: 'extension', loaded_at: null });
      expect(s.reason).toMatch(/entry .*broken-import\/index\.ts could not be imported: .*module side effect exploded/);
    });

    it('reports an entry that does not export a plugin definition', async () => {
      const s = await statusOf(t, 'not-a-plugin');
      expect(s.state).toBe('failed');
      expect(s.reason).toMatch(/not-a-plugin\/index\.ts must default-export definePlugin/);
    });

    it('reports an init that throws', async () => {
      const s = await statusOf(t, 'failing-init');
      expect(s.state).toBe('failed');
      expect(s.reason).toBe('plugin "failing-init" failed to initialise: cannot reach the upstream service');
    });

    it('reports an init that does not finish in time', async () => {
      const s = await statusOf(t, 'slow-init');
      expect(s.state).toBe('failed');
      expect(s.reason).toBe('plugin "slow-init" did not finish initialising within 300 ms');
    });

    it('refuses a plugin for a kernel version outside its manifest\u2019s range before any of its code runs', async () => {
      expect(await statusOf(t, 'future-kernel')).toMatchObject({
        state: 'failed',
        reason_code: 'KRN_ERR_PLUGIN_KERNEL_VERSION',
        reason: 'plugin "future-kernel" supports kernel versions >=1.0.0; this kernel is 0.1.8',
      });
      expect(await statusOf(t, 'current-kernel')).toMatchObject({ state: 'loaded' });
      const badRange = await statusOf(t, 'bad-range');
      expect(badRange.state).toBe('failed');
      expect(badRange.reason).toMatch(/kernel.*must be a semver range/);
    });

    it('lists every plugin with its state and keeps serving the good ones', async () => {
      const all = await statuses(t);
      expect(all.find((s) => s.id === 'plugins')?.state).toBe('loaded');
      // The repository's own manifests load too; this group's folder is what is checked exactly.
      const list = all.filter((s) => path.dirname(s.manifest_file) === manifests.dir);
      const byId = Object.fromEntries(list.map((s) => [s.id, s.state]));
      expect(byId).toEqual({
        probe: 'loaded',
        'bad-json': 'failed',
        'no-version': 'failed',
        'unknown-field': 'failed',
        'unknown-nested': 'failed',
        BadId: 'failed',
        'broken-import': 'failed',
        'not-a-plugin': 'failed',
        'failing-init': 'failed',
        'slow-init': 'failed',
        'future-kernel': 'failed',
        'current-kernel': 'loaded',
        'bad-range': 'failed',
      });
      for (const s of list) {
        if (s.state === 'failed') expect(s.reason, s.id).toBeTruthy();
        else expect(s.reason, s.id).toBeNull();
      }
      const probe = await t.request('GET', '/api/probe');
      expect(probe.status).toBe(200);
      expect(probe.body).toEqual({ plugin: 'probe', version: '1.0.0' });
      expect((await t.request('GET', '/healthz', { token: null })).status).toBe(200);
      expect((await t.request('GET', '/api/no-version')).status).toBe(404);
    });
  });

  describe('a required plugin that fails stops start-up', () => {
    it('rejects start-up naming the plugin when its init throws', async () => {
      const manifests = tempDir();
      try {
        writeManifest(manifests.dir, { id: 'probe', router: { prefix: '/api/probe', tag: 'probe' } }, 'probe');
        writeManifest(manifests.dir, { id: 'must-have', kind: 'extension', required: true }, 'failing-init');
        await expect(startTestKernel({ dialect, manifestDirs: withRepoManifests(manifests.dir) })).rejects.toThrow(
          /required plugin failed: plugin "must-have" failed to initialise: cannot reach the upstream service/,
        );
      } finally {
        manifests.remove();
      }
    });

    it('rejects start-up naming the plugin when its dependency is missing', async () => {
      const manifests = tempDir();
      try {
        writeManifest(manifests.dir, { id: 'must-have-dep', kind: 'extension', required: true, depends_on: ['absent'] }, 'recipes');
        await expect(startTestKernel({ dialect, manifestDirs: withRepoManifests(manifests.dir) })).rejects.toThrow(/must-have-dep.*"absent"/);
      } finally {
        manifests.remove();
      }
    });

    it('starts when the failing plugin is not required', async () => {
      const manifests = tempDir();
      writeManifest(manifests.dir, { id: 'optional', kind: 'extension', required: false }, 'failing-init');
      const t = await startTestKernel({ dialect, manifestDirs: withRepoManifests(manifests.dir) });
      try {
        expect((await statusOf(t, 'optional')).state).toBe('failed');
      } finally {
        await t.stop();
        manifests.remove();
      }
    });
  });

  describe('two plugins claiming the same id, route or capability', () => {
    let t: TestKernel;
    const manifests = tempDir();
    const files: Record<string, string> = {};
    beforeAll(async () => {
      const dir = manifests.dir;
      files.dupA = writeManifestAs(dir, 'dup-a.json', { id: 'dup', router: { prefix: '/api/dup-a', tag: 'dup' } }, 'probe');
      files.dupB = writeManifestAs(dir, 'dup-b.json', { id: 'dup', version: '2.0.0', router: { prefix: '/api/dup-b', tag: 'dup' } }, 'probe');
      writeManifest(dir, { id: 'probe-a', router: { prefix: '/api/probe', tag: 'probe' } }, 'probe');
      writeManifest(dir, { id: 'probe-b', router: { prefix: '/api/probe', tag: 'probe' } }, 'probe');
      const capability = { name: 'greetings.read', description: 'Read greetings', roles: ['viewer'] };
      writeManifest(dir, { id: 'cap-provider', router: { prefix: '/api/cap-provider', tag: 'greetings' }, capabilities: [capability] }, 'provider');
      writeManifest(dir, { id: 'cap-contributor', kind: 'extension', depends_on: ['cap-provider'], description: 'should not be listed', capabilities: [capability] }, 'contributor');
      t = await startTestKernel({ dialect, manifestDirs: withRepoManifests(dir) });
    });
    afterAll(async () => {
      await t?.stop();
      manifests.remove();
    });

    it('fails the second manifest of an id, naming both files', async () => {
      const dups = (await statuses(t)).filter((s) => s.id === 'dup');
      expect(dups.map((s) => s.manifest_file)).toEqual([files.dupA, files.dupB]);
      const [first, second] = dups;
      expect(first).toMatchObject({ state: 'loaded', reason: null, version: '1.0.0', prefix: '/api/dup-a' });
      expect(second).toMatchObject({ state: 'failed', version: '2.0.0', prefix: '/api/dup-b', loaded_at: null });
      expect(second.reason).toBe(`plugin id "dup" is claimed by both ${files.dupA} and ${files.dupB}`);
      expect((await t.request('GET', '/api/dup-a')).body).toEqual({ plugin: 'dup', version: '1.0.0' });
      expect((await t.request('GET', '/api/dup-b')).status).toBe(404);
      // The id resolves to the plugin that serves it.
      expect(await statusOf(t, 'dup')).toMatchObject({ state: 'loaded', manifest_file: files.dupA });
    });

    it('fails the second plugin claiming a route, naming both plugins', async () => {
      expect((await statusOf(t, 'probe-a')).state).toBe('loaded');
      const b = await statusOf(t, 'probe-b');
      expect(b.state).toBe('failed');
      expect(b.reason).toBe('route GET /api/probe is claimed by both plugin "probe-a" and plugin "probe-b"');
      expect((await t.request('GET', '/api/probe')).body).toEqual({ plugin: 'probe-a', version: '1.0.0' });
    });

    it('fails the second plugin defining a capability, naming both, and keeps nothing of it', async () => {
      expect((await statusOf(t, 'cap-provider')).state).toBe('loaded');
      const c = await statusOf(t, 'cap-contributor');
      expect(c.state).toBe('failed');
      expect(c.reason).toBe('capability "greetings.read" is defined by both plugin "cap-provider" and plugin "cap-contributor"');
      // A plugin that failed must not leave its contribution behind.
      const listed = await t.request('GET', '/api/cap-provider');
      expect(listed.status).toBe(200);
      expect(listed.body).toEqual({});
    });
  });

  describe('dependency order and extension points', () => {
    let t: TestKernel;
    const manifests = tempDir();
    beforeAll(async () => {
      const dir = manifests.dir;
      // The contributor's file sorts before the provider's: order must come from depends_on.
      writeManifest(dir, { id: 'a-contributor', kind: 'extension', depends_on: ['greeter'], description: 'hello from a' }, 'contributor');
      writeManifest(dir, { id: 'b-declared', kind: 'extension', depends_on: ['greeter'], contributes: { 'provider.greetings': [{ text: 'declared hello' }] } }, 'recipes');
      writeManifest(dir, { id: 'greeter', router: { prefix: '/api/greeter', tag: 'greeter' } }, 'provider');
      writeManifest(dir, { id: 'orphan', kind: 'extension', depends_on: ['nowhere'] }, 'recipes');
      writeManifest(dir, { id: 'orphan-child', kind: 'extension', depends_on: ['orphan'] }, 'recipes');
      writeManifest(dir, { id: 'cycle-a', kind: 'extension', depends_on: ['cycle-b'] }, 'recipes');
      writeManifest(dir, { id: 'cycle-b', kind: 'extension', depends_on: ['cycle-a'] }, 'recipes');
      writeManifest(dir, { id: 'sneaky', kind: 'extension', description: 'sneaky hello' }, 'contributor');
      writeManifest(dir, { id: 'sneaky-declared', kind: 'extension', contributes: { 'provider.greetings': [{ text: 'sneaky declared' }] } }, 'recipes');
      writeManifest(dir, { id: 'clock', kind: 'extension' }, 'service-provider');
      writeManifest(dir, { id: 'clock-user', depends_on: ['clock'], router: { prefix: '/api/clock-user', tag: 'clock-user' } }, 'service-user');
      writeManifest(dir, { id: 'clock-thief', router: { prefix: '/api/clock-thief', tag: 'clock-thief' } }, 'service-user');
      t = await startTestKernel({ dialect, manifestDirs: withRepoManifests(dir) });
    });
    afterAll(async () => {
      await t?.stop();
      manifests.remove();
    });

    it('hands a plugin the services of the plugins it depends on, and only those', async () => {
      expect((await t.request('GET', '/api/clock-user', { token: null })).body).toEqual({ provider_version: '1.0.0' });
      const thief = await statusOf(t, 'clock-thief');
      expect(thief.state).toBe('failed');
      expect(thief.reason).toMatch(/"clock-thief" uses service "clock.version", which none of the plugins it depends on provides/);
      // Reloading the provider reloads its dependent, which then holds the new implementation.
      writeManifest(manifests.dir, { id: 'clock', version: '2.0.0', kind: 'extension' }, 'service-provider');
      expect((await t.request('POST', '/api/plugins/clock/reload')).status).toBe(200);
      expect((await t.request('GET', '/api/clock-user', { token: null })).body).toEqual({ provider_version: '2.0.0' });
    });

    it('loads a contributor after the provider it depends on, whatever the file order', async () => {
      expect((await statusOf(t, 'greeter')).state).toBe('loaded');
      expect((await statusOf(t, 'a-contributor')).state).toBe('loaded');
      expect((await statusOf(t, 'b-declared')).state).toBe('loaded');
      const res = await t.request('GET', '/api/greeter');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ 'a-contributor': 'hello from a', 'b-declared': 'declared hello' });
    });

    it('fails a plugin whose dependency is missing, and the plugins depending on it', async () => {
      const orphan = await statusOf(t, 'orphan');
      expect(orphan.state).toBe('failed');
      expect(orphan.reason).toBe('plugin "orphan" depends on "nowhere", which is not loaded');
      const child = await statusOf(t, 'orphan-child');
      expect(child.state).toBe('failed');
      expect(child.reason).toBe('plugin "orphan-child" depends on "orphan", which is not loaded');
    });

    it('fails both plugins of a dependency cycle', async () => {
      for (const id of ['cycle-a', 'cycle-b']) {
        const s = await statusOf(t, id);
        expect(s.state, id).toBe('failed');
        expect(s.reason, id).toBe('plugins depend on each other in a cycle: cycle-a → cycle-b');
      }
    });

    it('fails a plugin contributing to an extension point of a plugin it does not depend on', async () => {
      const sneaky = await statusOf(t, 'sneaky');
      expect(sneaky.state).toBe('failed');
      expect(sneaky.reason).toBe('plugin "sneaky" contributes to extension point "provider.greetings", which none of the plugins it depends on provides');
      const declared = await statusOf(t, 'sneaky-declared');
      expect(declared.state).toBe('failed');
      expect(declared.reason).toMatch(/"sneaky-declared" contributes to extension point "provider.greetings"/);
      const res = await t.request('GET', '/api/greeter');
      expect(Object.keys(res.body).sort()).toEqual(['a-contributor', 'b-declared']);
    });
  });

  describe('disabled plugins, recipe types and access to the plugins router', () => {
    let t: TestKernel;
    const manifests = tempDir();
    const params = { type: 'object', properties: { field: { type: 'string' } }, required: ['field'] };
    beforeAll(async () => {
      const dir = manifests.dir;
      writeManifest(dir, { id: 'probe', router: { prefix: '/api/probe', tag: 'probe' } }, 'probe');
      writeManifest(dir, { id: 'off', enabled: false, router: { prefix: '/api/off', tag: 'off' } }, 'probe');
      const recipes = (id: string, type: Record<string, unknown>) =>
        writeManifest(dir, { id, kind: 'recipe-type', depends_on: ['pipeline'], contributes: { 'pipeline.recipe-types': [type] } }, 'recipes');
      recipes('recipes', { id: 'uppercase', handler: 'handlers:uppercase', description: 'Upper-cases a column', params });
      recipes('recipes-missing', { id: 'lowercase', handler: 'handlers:lowercase', params: {} });
      recipes('recipes-no-module', { id: 'nothing', handler: 'nowhere:run', params: {} });
      t = await startTestKernel({ dialect, manifestDirs: withRepoManifests(dir) });
    });
    afterAll(async () => {
      await t?.stop();
      manifests.remove();
    });

    it('lists a disabled plugin as disabled and does not serve it', async () => {
      const s = await statusOf(t, 'off');
      expect(s).toMatchObject({ state: 'disabled', reason: null, loaded_at: null, version: '1.0.0' });
      expect((await t.request('GET', '/api/off')).status).toBe(404);
      const doc = await t.request('GET', '/openapi.json', { token: null });
      expect(Object.keys(doc.body.paths)).toContain('/api/probe');
      expect(Object.keys(doc.body.paths).filter((p) => p.startsWith('/api/off'))).toEqual([]);
    });

    it('lists the recipe types of loaded plugins with their params schema', async () => {
      expect((await statusOf(t, 'recipes')).state).toBe('loaded');
      const res = await t.request('GET', '/api/plugins/recipe-types');
      expect(res.status).toBe(200);
      // Beside the built-in types (plugins recipe_*: test/pipeline/recipe-types.test.ts).
      expect(res.body.filter((type: { plugin_id: string }) => !type.plugin_id.startsWith('recipe_'))).toEqual([{ id: 'uppercase', plugin_id: 'recipes', description: 'Upper-cases a column', params }]);
    });

    it('fails a plugin whose recipe handler does not exist', async () => {
      const missing = await statusOf(t, 'recipes-missing');
      expect(missing.state).toBe('failed');
      expect(missing).toMatchObject({
        reason_code: 'KRN_ERR_PLUGIN_CONTRIBUTION_INVALID',
        reason: 'plugin "recipes-missing" contributes to extension point "pipeline.recipe-types" something it does not accept: recipe type "lowercase": handler handlers:lowercase does not export a function named lowercase',
      });
      const noModule = await statusOf(t, 'recipes-no-module');
      expect(noModule.state).toBe('failed');
      expect(noModule.reason_code).toBe('KRN_ERR_PLUGIN_CONTRIBUTION_INVALID');
      expect(noModule.reason).toMatch(/^plugin "recipes-no-module" contributes to extension point "pipeline.recipe-types" something it does not accept: recipe type "nothing": handler nowhere:run cannot be imported/);
    });

    it('needs a token to list plugins and lets any role read', async () => {
      const anonymous = await t.request('GET', '/api/plugins', { token: null });
      expect(anonymous.status).toBe(401);
      expect(anonymous.headers.get('content-type')).toMatch(/application\/problem\+json/);
      const viewer = await t.userToken('viewer');
      const list = await t.request<Status[]>('GET', '/api/plugins', { token: viewer.token });
      expect(list.status).toBe(200);
      expect(list.body.map((s) => s.id)).toContain('probe');
      expect((await t.request('GET', '/api/plugins/probe', { token: viewer.token })).status).toBe(200);
      expect((await t.request('GET', '/api/plugins/recipe-types', { token: viewer.token })).status).toBe(200);
    });

    it('lets only a platform admin reload, and 404s an unknown id', async () => {
      const viewer = await t.userToken('viewer');
      const denied = await t.request('POST', '/api/plugins/probe/reload', { token: viewer.token });
      expect(denied.status).toBe(403);
      const before = await statusOf(t, 'probe');
      const reloaded = await t.request<Status>('POST', '/api/plugins/probe/reload');
      expect(reloaded.status).toBe(200);
      expect(reloaded.body).toMatchObject({ id: 'probe', state: 'loaded', version: '1.0.0', reason: null, last_reload_error: null });
      expect(reloaded.body.loaded_at).not.toBeNull();
      expect(Date.parse(reloaded.body.loaded_at!)).toBeGreaterThanOrEqual(Date.parse(before.loaded_at!));
      expect((await t.request('GET', '/api/probe')).body).toEqual({ plugin: 'probe', version: '1.0.0' });
      const unknown = await t.request('POST', '/api/plugins/nope/reload');
      expect(unknown.status).toBe(404);
      expect(unknown.body.detail).toMatch(/no plugin with id "nope"/);
      expect((await t.request('GET', '/api/plugins/nope')).status).toBe(404);
    });
  });
});
