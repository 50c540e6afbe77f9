import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, type TestKernel } from '../harness/index.ts';

const SHOUT_PARAMS = { type: 'object', properties: { text: { type: 'string', minLength: 1 } }, required: ['text'], additionalProperties: false };
const TRIM_PARAMS = { type: 'object', properties: { width: { type: 'integer', minimum: 1 }, columns: { type: 'array', items: { type: 'string' } } }, required: ['width'] };

/**
 * Third-party plugins as their authors would write them, in a folder outside the repository: `chef`
 * contributes a recipe type from its manifest (`chef_shout`, handler `handlers:shout`) and one from
 * code (`chef_trim`), and checks and runs recipe params through the pipeline's service; the others
 * contribute what the pipeline refuses.
 */
function writeThirdPartyPlugins(root: string) {
  const file = (name: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), text);
  };
  file(
    'chef/index.ts',
    `import { pathToFileURL } from 'node:url';
import { definePlugin, defineRoute, problems, z } from 'data-platform/plugin-api';
import { pipelineRecipeTypes as catalog, recipeType, recipeTypes } from 'data-platform/plugins/pipeline';

export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    ctx.contribute(recipeTypes, recipeType({
      id: 'chef_trim',
      description: 'Trims columns to a width',
      params: ${JSON.stringify(TRIM_PARAMS)},
      handler: 'handlers:trim',
    }));
    const types = ctx.useService(catalog);
    return {
      routes: [
        defineRoute({
          method: 'post', path: '/runs/{type}', summary: 'Check params and run a recipe type', security: 'bearer', orgScoped: true,
          request: { params: z.object({ type: z.string() }), body: z.object({ params: z.unknown() }) },
          responses: { 200: { description: 'What the handler answered', schema: z.object({ result: z.unknown() }) } },
          handler: async ({ orgId, params, body }) => {
            const type = await types.get(orgId, params.type);
            if (!type) throw problems.notFound('no recipe type ' + params.type + ' here');
            const errors = type.check(body.params);
            if (errors.length) throw problems.badRequest('params do not match the recipe type', errors);
            // The handler's module as the pipeline found it, imported afresh (a recipe run imports it in a worker thread).
            const module = await import(pathToFileURL(type.handler!.modulePath).href + '?at=' + Date.now());
            return { result: await module[type.handler!.exportName]({ params: body.params }) };
          },
        }),
      ],
    };
  },
});
`,
  );
  file('chef/handlers.ts', `export function shout({ params }: { params: { text: string } }) { return params.text.toUpperCase() + '!'; }\nexport function trim({ params }: { params: { width: number } }) { return 'trimmed to ' + params.width; }\n`);
  file('other/index.ts', `import { definePlugin } from 'data-platform/plugin-api';\n\nexport default definePlugin({ deps: {}, init: () => undefined });\n`);
  file('other/handlers.ts', `export function shout() { return 'not the first'; }\nexport function salt() { return 'salted'; }\n`);
  file(
    'coded/index.ts',
    `import { definePlugin, extensionPoint } from 'data-platform/plugin-api';

const recipeTypes = extensionPoint<Record<string, unknown>>('pipeline.recipe-types');

export default definePlugin({ deps: {}, init: (_services, ctx) => ctx.contribute(recipeTypes, { id: 'coded_bad', params: { type: 'nope' }, plan: () => [] }) });
`,
  );
  file(
    'pantry/index.ts',
    `import { definePlugin } from 'data-platform/plugin-api';

export default definePlugin({
  deps: {},
  migrations: { '2026-01-01T0000_items': { async up({ db, storage }) { await storage.addIdColumn(db.schema.createTable('pantry_items')).execute(); } } },
  init: () => undefined,
});
`,
  );
  const manifest = (id: string, entry: string, types: Record<string, unknown>[], more: Record<string, unknown> = {}) =>
    file(
      `manifests/${id}.json`,
      JSON.stringify({ id, version: '1.0.0', kind: 'extension', entry, depends_on: ['pipeline'], contributes: { 'pipeline.recipe-types': types }, ...more }),
    );
  manifest('chef', '../chef/index.ts', [{ id: 'chef_shout', handler: 'handlers:shout', description: 'Shouts a text', params: SHOUT_PARAMS }], {
    kind: 'router',
    router: { prefix: '/api/chef', tag: 'chef' },
  });
  // Loaded after chef (file order): the type id is chef's.
  manifest('copycat', '../other/index.ts', [{ id: 'chef_shout', handler: 'handlers:shout', params: {} }]);
  manifest('invalid_schema', '../other/index.ts', [{ id: 'bad_schema', handler: 'handlers:shout', params: { type: 'nope' } }]);
  manifest('unimportable', '../other/index.ts', [{ id: 'lost', handler: 'nowhere:run', params: {} }]);
  manifest('not_a_function', '../other/index.ts', [{ id: 'absent', handler: 'handlers:whisper', params: {} }]);
  manifest('coded', '../coded/index.ts', []);
  manifest('pantry', '../pantry/index.ts', [{ id: 'pantry_stock', handler: 'stock:count', params: {} }]);
  manifest('spice', '../other/index.ts', [{ id: 'spice_salt', handler: 'handlers:salt', params: { type: 'object' } }]);
  manifest('stranger', '../other/index.ts', [{ id: 'strange', handler: 'handlers:shout', params: {} }], { depends_on: [] });
}

describe.each(DIALECTS)('recipe types in the pipeline plugin (%s)', (dialect) => {
  let t: TestKernel;
  const folder = tempDir('dp-recipe-types-');
  let orgB: number;
  const inOrg = (orgId: number, more: Record<string, unknown> = {}) => ({ ...more, headers: { 'X-Org-Id': String(orgId) } });
  const listed = async (orgId: number) => {
    const res = await t.request('GET', '/api/plugins/recipe-types', inOrg(orgId));
    expect(res.status, res.text).toBe(200);
    // The built-in types (plugins recipe_*) are listed too; these tests are about the third-party ones.
    return (res.body as { id: string; plugin_id: string; description: string | null; params: unknown }[]).filter((type) => !type.plugin_id.startsWith('recipe_'));
  };
  const status = async (id: string) => (await t.request('GET', `/api/plugins/${id}`)).body;

  beforeAll(async () => {
    writeThirdPartyPlugins(folder.dir);
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), path.join(folder.dir, 'manifests')] });
    orgB = (await t.outsider('bea')).orgId;
  });
  afterAll(async () => {
    await t?.stop();
    folder.remove();
  });

  it('lists the built-in types, each contributed by a plugin of its own, beside the third-party ones', async () => {
    const res = await t.request('GET', '/api/plugins/recipe-types', inOrg(1));
    const builtIn = (res.body as { id: string; plugin_id: string }[]).filter((type) => type.plugin_id.startsWith('recipe_'));
    expect(builtIn.map((type) => `${type.id}:${type.plugin_id}`)).toEqual(
      ['distinct', 'filter', 'group', 'join', 'llm_prompt', 'predict', 'sample', 'select', 'split', 'sql', 'stack', 'top_n'].map((id) => `${id}:recipe_${id}`),
    );
  });

  it('lists the types a third-party plugin contributes from its manifest and from code, with their JSON Schemas', async () => {
    expect(await status('pipeline')).toMatchObject({ state: 'loaded', prefix: '/api/pipeline' });
    expect(await status('chef')).toMatchObject({ state: 'loaded' });
    expect(await listed(1)).toEqual([
      { id: 'chef_shout', plugin_id: 'chef', description: 'Shouts a text', params: SHOUT_PARAMS },
      { id: 'chef_trim', plugin_id: 'chef', description: 'Trims columns to a width', params: TRIM_PARAMS },
      { id: 'spice_salt', plugin_id: 'spice', description: null, params: { type: 'object' } },
    ]);
  });

  it('refuses a second plugin contributing a type id another already has: the first keeps serving', async () => {
    expect(await status('copycat')).toMatchObject({
      state: 'failed',
      reason_code: 'KRN_ERR_PLUGIN_CONTRIBUTION_DUPLICATE',
      reason: 'plugin "copycat" contributes "chef_shout" to extension point "pipeline.recipe-types", which plugin "chef" already contributes',
    });
    const shout = (await listed(1)).find((type) => type.id === 'chef_shout');
    expect(shout).toMatchObject({ plugin_id: 'chef', description: 'Shouts a text' });
    const run = await t.request('POST', '/api/chef/runs/chef_shout', { body: { params: { text: 'hello' } } });
    expect(run.status, run.text).toBe(200);
    expect(run.body).toEqual({ result: 'HELLO!' });
  });

  it('refuses an invalid JSON Schema and a handler that does not import as a function, with coded reasons', async () => {
    const refusal = (plugin: string, type: string) => `plugin "${plugin}" contributes to extension point "pipeline.recipe-types" something it does not accept: recipe type "${type}": `;
    const invalid = await status('invalid_schema');
    expect(invalid).toMatchObject({ state: 'failed', reason_code: 'KRN_ERR_PLUGIN_CONTRIBUTION_INVALID' });
    expect(invalid.reason).toBe(`${refusal('invalid_schema', 'bad_schema')}params is not a valid JSON Schema: schema is invalid: data/type must be equal to one of the allowed values, data/type must be array, data/type must match a schema in anyOf`);
    // From code the same: refused by the pipeline when it accepts the contribution.
    const coded = await status('coded');
    expect(coded).toMatchObject({ state: 'failed', reason_code: 'KRN_ERR_PLUGIN_CONTRIBUTION_INVALID' });
    expect(coded.reason).toMatch(new RegExp(`^${refusal('coded', 'coded_bad').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}params is not a valid JSON Schema`));
    const unimportable = await status('unimportable');
    expect(unimportable).toMatchObject({ state: 'failed', reason_code: 'KRN_ERR_PLUGIN_CONTRIBUTION_INVALID' });
    expect(unimportable.reason.startsWith(`${refusal('unimportable', 'lost')}handler nowhere:run cannot be imported: `)).toBe(true);
    expect(await status('not_a_function')).toMatchObject({
      state: 'failed',
      reason_code: 'KRN_ERR_PLUGIN_CONTRIBUTION_INVALID',
      reason: `${refusal('not_a_function', 'absent')}handler handlers:whisper does not export a function named whisper`,
    });
    expect((await listed(1)).map((type) => type.id)).toEqual(['chef_shout', 'chef_trim', 'spice_salt']);
  });

  it('lets only plugins depending on the pipeline contribute', async () => {
    expect(await status('stranger')).toMatchObject({
      state: 'failed',
      reason_code: 'KRN_ERR_PLUGIN_EXTENSION_POINT_MISSING',
      reason: 'plugin "stranger" contributes to extension point "pipeline.recipe-types", which none of the plugins it depends on provides',
    });
  });

  it('checks params against the compiled schema through the pipeline service, as field errors under body.params', async () => {
    const bad = await t.request('POST', '/api/chef/runs/chef_trim', { body: { params: { width: 0, columns: ['a', 7] } } });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(bad.body.errors).toEqual([
      { path: 'body.params.width', message: 'must be >= 1' },
      { path: 'body.params.columns.1', message: 'must be string' },
    ]);
    const missing = await t.request('POST', '/api/chef/runs/chef_shout', { body: { params: { loud: true } } });
    expect(missing.status).toBe(400);
    expect(missing.body.errors).toEqual([
      { path: 'body.params.text', message: "must have required property 'text'" },
      { path: 'body.params.loud', message: 'must NOT have additional properties' },
    ]);
    const good = await t.request('POST', '/api/chef/runs/chef_trim', { body: { params: { width: 3, columns: ['a'] } } });
    expect(good.status, good.text).toBe(200);
    expect(good.body).toEqual({ result: 'trimmed to 3' });
  });

  it('offers the types of a plugin disabled for one organization only in the others, in the list and through the service', async () => {
    const run = (orgId: number) => t.request('POST', '/api/chef/runs/spice_salt', inOrg(orgId, { body: { params: {} } }));
    const off = await t.request('PUT', `/api/plugins/spice/organizations/${orgB}`, inOrg(orgB, { body: { enabled: false } }));
    expect(off.status, off.text).toBe(200);
    expect((await listed(orgB)).map((type) => type.id)).toEqual(['chef_shout', 'chef_trim']);
    expect((await listed(1)).map((type) => type.id)).toEqual(['chef_shout', 'chef_trim', 'spice_salt']);
    const there = await run(orgB);
    expect(there.status).toBe(404);
    expect(there.body.detail).toBe('no recipe type spice_salt here');
    expect((await run(1)).body).toEqual({ result: 'salted' });

    expect((await t.request('PUT', `/api/plugins/spice/organizations/${orgB}`, inOrg(orgB, { body: { enabled: true } }))).status).toBe(200);
    expect((await listed(orgB)).map((type) => type.id)).toEqual(['chef_shout', 'chef_trim', 'spice_salt']);
    expect((await run(orgB)).body).toEqual({ result: 'salted' });
  });

  it('refuses a manifest\'s recipe type before its plugin\'s migrations run', async () => {
    const pantry = await status('pantry');
    expect(pantry).toMatchObject({ state: 'failed', reason_code: 'KRN_ERR_PLUGIN_CONTRIBUTION_INVALID' });
    expect(pantry.reason).toMatch(/recipe type "pantry_stock": handler stock:count cannot be imported/);
    expect((await t.kernel.storage.snapshotSchema()).map((table) => table.name)).not.toContain('pantry_items');
  });

  it('resolves a reloaded contributor\'s handler afresh, and keeps one entry per type across the reload', async () => {
    fs.writeFileSync(path.join(folder.dir, 'chef/handlers.ts'), `export function shout({ params }: { params: { text: string } }) { return params.text + '?'; }\nexport function trim() { return 'trimmed'; }\n`);
    const reloaded = await t.request('POST', '/api/plugins/chef/reload');
    expect(reloaded.status, reloaded.text).toBe(200);
    const run = await t.request('POST', '/api/chef/runs/chef_shout', { body: { params: { text: 'hello' } } });
    expect(run.body).toEqual({ result: 'hello?' });
    expect((await listed(1)).map((type) => type.id)).toEqual(['chef_shout', 'chef_trim', 'spice_salt']);
  });
});
