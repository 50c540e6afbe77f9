import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, until, type TestKernel } from '../harness/index.ts';
import { createRecipe, emptyDataset, loadDataset, rowsOf, runRecipe } from './pipeline-helpers.ts';

/**
 * A third-party plugin as its author ships it, in a folder outside the repository: a manifest of
 * kind recipe-type with no entry module, its handlers in a module next to it.
 */
function writeKitchen(root: string) {
  fs.writeFileSync(path.join(root, 'package.json'), JSON.stringify({ type: 'module' }));
  fs.writeFileSync(
    path.join(root, 'handlers.ts'),
    `import type { RecipeHandlerContext } from 'data-platform/plugins/pipeline';

/** Upper-cases one column, copying every row through. */
export async function shout(ctx: RecipeHandlerContext<{ column: string }>) {
  const [input] = ctx.inputs;
  await ctx.output.columns([...input.dataset.columns, { name: 'shouted', type: 'boolean' }]);
  let batch: Record<string, unknown>[] = [];
  for await (const row of input.rows()) {
    batch.push({ ...row, [ctx.params.column]: String(row[ctx.params.column]).toUpperCase(), shouted: true });
    if (batch.length === 500) {
      await ctx.output.write(batch);
      batch = [];
    }
  }
  if (batch.length) await ctx.output.write(batch);
  ctx.log.info('shouted');
}

export async function explode() {
  throw new Error('the kitchen is on fire');
}

export async function hang() {
  await new Promise(() => undefined);
}

export async function spin() {
  for (;;);
}

export async function wrongType(ctx: RecipeHandlerContext) {
  await ctx.output.columns([{ name: 'n', type: 'integer' }]);
  await ctx.output.write([{ n: 1 }, { n: 'two' }]);
}
`,
  );
  const type = (id: string, handler: string) => ({ id, handler: `handlers:${handler}`, description: `kitchen ${id}`, params: { type: 'object', properties: { column: { type: 'string' } }, additionalProperties: false } });
  fs.writeFileSync(
    path.join(root, 'kitchen.json'),
    JSON.stringify({
      id: 'kitchen',
      version: '1.0.0',
      kind: 'recipe-type',
      depends_on: ['pipeline'],
      recipe_types: [type('shout', 'shout'), type('explode', 'explode'), type('hang', 'hang'), type('spin', 'spin'), type('wrong_type', 'wrongType')],
    }),
  );
}

/**
 * A second recipe-type plugin of the folder whose init waits while the file `slow` exists next to
 * it (writing `slow-started` first): a reload that includes it takes that long to build its generation.
 */
function writeSlowKitchen(root: string) {
  fs.writeFileSync(
    path.join(root, 'slow-kitchen.ts'),
    `import fs from 'node:fs';
import path from 'node:path';
import { definePlugin } from 'data-platform/plugin-api';

export default definePlugin({
  deps: {},
  async init(_services, ctx) {
    if (!fs.existsSync(path.join(ctx.dir, 'slow'))) return;
    fs.writeFileSync(path.join(ctx.dir, 'slow-started'), '');
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  },
});
`,
  );
  fs.writeFileSync(
    path.join(root, 'slow-kitchen.json'),
    JSON.stringify({
      id: 'slow-kitchen',
      version: '1.0.0',
      kind: 'recipe-type',
      entry: './slow-kitchen.ts',
      depends_on: ['pipeline'],
      recipe_types: [{ id: 'slow_shout', handler: 'handlers:shout', description: 'shout, from a plugin slow to load', params: { type: 'object', properties: { column: { type: 'string' } }, additionalProperties: false } }],
    }),
  );
}

describe.each(DIALECTS)('plugin recipe types, loaded from a folder outside the repository (%s)', (dialect) => {
  let t: TestKernel;
  const folder = tempDir('dp-kitchen-');
  let project: number;
  let words: number;
  let orgB: { orgId: number; token: string };

  beforeAll(async () => {
    writeKitchen(folder.dir);
    writeSlowKitchen(folder.dir);
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), folder.dir], env: { RECIPE_TIMEOUT_S: '3' } });
    project = (await t.request('POST', '/api/projects', { body: { key: 'KITCHEN', name: 'Kitchen' } })).body.id;
    words = await loadDataset(t, project, 'words', ['id:integer', 'word:string'], Array.from({ length: 1200 }, (_, i) => `${i + 1},word ${i + 1}`));
    orgB = await t.outsider('kit');
  });
  afterAll(async () => {
    await t?.stop();
    folder.remove();
  });

  it('runs the handler in a worker thread: rows stream in from the input and out to the output, swapped in at the end', async () => {
    expect((await t.request('GET', '/api/plugins/kitchen')).body).toMatchObject({ state: 'loaded', kind: 'recipe-type' });
    const out = await emptyDataset(t, project, 'shouted');
    const recipe = await createRecipe(t, { project_id: project, name: 'shout', type: 'shout', inputs: [words], outputs: [out], params: { column: 'word' } });
    const run = await runRecipe(t, recipe);
    expect(run, JSON.stringify(run)).toMatchObject({ status: 'succeeded', rows_written: 1200 });
    const dataset = (await t.request('GET', `/api/datasets/${out}`)).body;
    expect(dataset).toMatchObject({ row_count: 1200, version: 2 });
    expect(dataset.columns.map((c: { name: string; type: string }) => `${c.name}:${c.type}`)).toEqual(['id:integer', 'word:string', 'shouted:boolean']);
    expect((await rowsOf(t, out)).slice(0, 2)).toEqual([
      { id: 1, word: 'WORD 1', shouted: true },
      { id: 2, word: 'WORD 2', shouted: true },
    ]);
    const logs = (await t.request('GET', `/api/pipeline/runs/${run.id}/logs`)).body.items.map((l: { message: string }) => l.message);
    expect(logs).toContain('shouted');
  });

  it('runs a recipe started while the pipeline reloads: the new version takes work only once every recipe type is back', async () => {
    const out = await emptyDataset(t, project, 'shouted_in_reload');
    const recipe = await createRecipe(t, { project_id: project, name: 'slow shout', type: 'slow_shout', inputs: [words], outputs: [out], params: { column: 'word' } });
    const slow = path.join(folder.dir, 'slow');
    const started = path.join(folder.dir, 'slow-started');
    fs.writeFileSync(slow, '');
    try {
      // The reload has loaded the new pipeline and waits in the slow plugin's init: slow_shout is not offered by the generation being built.
      const reloading = t.request('POST', '/api/plugins/pipeline/reload');
      expect(await until(async () => fs.existsSync(started), (seen) => seen, 20_000)).toBe(true);
      const run = await runRecipe(t, recipe);
      expect(run, JSON.stringify(run)).toMatchObject({ status: 'succeeded', rows_written: 1200 });
      const reload = await reloading;
      expect(reload.status, reload.text).toBe(200);
    } finally {
      fs.rmSync(slow, { force: true });
      fs.rmSync(started, { force: true });
    }
  });

  it.each([
    ['explode', /Recipe handler failed \(threw\)/, /the kitchen is on fire/],
    ['hang', /Recipe handler failed \(timeout\)/, /longer than 3 s/],
    ['spin', /Recipe handler failed \(timeout\)/, /longer than 3 s/],
    ['wrong_type', /Recipe handler failed \(invalid_output\)/, /column "n": expected an integer, got "two"/],
  ])('a handler that fails (%s) fails its run with the reason, leaves the output as it was, and the server keeps serving', async (type, title, detail) => {
    const out = await loadDataset(t, project, `kept_${type}`, ['kept:string'], ['still here']);
    const recipe = await createRecipe(t, { project_id: project, name: `fails ${type}`, type, inputs: [words], outputs: [out], params: {} });
    const started = Date.now();
    const run = await runRecipe(t, recipe);
    expect(run.status).toBe('failed');
    expect(run.error.title).toMatch(title);
    expect(run.error.detail).toMatch(detail);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(await rowsOf(t, out)).toEqual([{ kept: 'still here' }]);
    expect((await t.request('GET', `/api/datasets/${out}`)).body.version).toBe(2);
    expect((await t.request('GET', '/healthz')).status).toBe(200);
  });

  it('is refused in an organization where its plugin is disabled, and offered again once enabled', async () => {
    const inB = (more: Record<string, unknown> = {}) => ({ ...more, token: orgB.token, headers: { 'X-Org-Id': String(orgB.orgId) } });
    const off = await t.request('PUT', `/api/plugins/kitchen/organizations/${orgB.orgId}`, { headers: { 'X-Org-Id': String(orgB.orgId) }, body: { enabled: false } });
    expect(off.status, off.text).toBe(200);
    const projectB = (await t.request('POST', '/api/projects', inB({ body: { key: 'KB', name: 'Kitchen B' } }))).body.id;
    const wordsB = await loadDataset(t, projectB, 'words_b', ['word:string'], ['hi'], { token: orgB.token });
    const outB = await emptyDataset(t, projectB, 'out_b', orgB.token);
    const listed = await t.request('GET', '/api/plugins/recipe-types', inB());
    expect(listed.body.map((type: { id: string }) => type.id)).not.toContain('shout');
    const refused = await t.request('POST', '/api/pipeline/recipes', inB({ body: { project_id: projectB, name: 'shout', type: 'shout', inputs: [wordsB], outputs: [outB], params: { column: 'word' } } }));
    expect(refused.status).toBe(422);
    expect(refused.body.detail).toMatch(/recipe type "shout" is not offered in this organization/);
    expect(refused.body.errors).toEqual([{ path: 'body.type', message: 'unknown recipe type shout' }]);

    expect((await t.request('PUT', `/api/plugins/kitchen/organizations/${orgB.orgId}`, { headers: { 'X-Org-Id': String(orgB.orgId) }, body: { enabled: true } })).status).toBe(200);
    const recipe = await t.request('POST', '/api/pipeline/recipes', inB({ body: { project_id: projectB, name: 'shout', type: 'shout', inputs: [wordsB], outputs: [outB], params: { column: 'word' } } }));
    expect(recipe.status, recipe.text).toBe(201);
    // Disabled again after the recipe was saved: its run fails, naming the type.
    expect((await t.request('PUT', `/api/plugins/kitchen/organizations/${orgB.orgId}`, { headers: { 'X-Org-Id': String(orgB.orgId) }, body: { enabled: false } })).status).toBe(200);
    const started = await t.request('POST', `/api/pipeline/recipes/${recipe.body.id}/run`, inB());
    expect(started.status).toBe(202);
    const run = await (async () => {
      for (let i = 0; i < 200; i += 1) {
        const res = await t.request('GET', `/api/pipeline/runs/${started.body.run.id}`, inB());
        if (['failed', 'succeeded'].includes(res.body.status)) return res.body;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error('the run did not end');
    })();
    expect(run).toMatchObject({ status: 'failed', error: { detail: expect.stringMatching(/recipe type "shout" is not offered/) } });
  });
});
