// Written as a plugin author's own test would be: the kernel harness and the contract come from the SDK's package specifiers.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, type TestKernel } from 'data-platform/testing';

/** A plugin in a folder outside the repository, importing nothing but the SDK. */
const PLUGIN_SOURCE = `
import { definePlugin, defineRoute, kernelServices, z } from 'data-platform/plugin-api';

export default definePlugin({
  deps: { config: kernelServices.config },
  config: z.object({ greeting: z.string().min(1), times: z.number().int().min(1).default(1) }).strict(),
  init({ config }, ctx) {
    return {
      routes: [
        defineRoute({
          method: 'get', path: '', summary: 'Greets as configured', security: 'bearer', orgScoped: true,
          responses: { 200: { description: 'ok', schema: z.object({ greeting: z.string(), org_id: z.number(), user: z.string(), kernel_settings: z.array(z.string()) }) } },
          // orgId and principal are typed as present: no assertion needed on an org-scoped bearer route.
          handler: ({ orgId, principal }) => ({
            greeting: ctx.config.greeting.repeat(ctx.config.times),
            org_id: orgId,
            user: principal.username,
            kernel_settings: Object.keys(config),
          }),
        }),
      ],
    };
  },
});
`;

describe.each(DIALECTS)('plugin SDK (%s)', (dialect) => {
  let t: TestKernel;
  const plugins = tempDir('dp-sdk-');
  const install = (id: string, config?: Record<string, unknown>, source = PLUGIN_SOURCE) => {
    fs.mkdirSync(path.join(plugins.dir, id), { recursive: true });
    fs.writeFileSync(path.join(plugins.dir, id, 'index.ts'), source);
    fs.writeFileSync(path.join(plugins.dir, `${id}.json`), JSON.stringify({ id, version: '1.0.0', kind: 'router', entry: `./${id}/index.ts`, router: { prefix: `/api/${id}`, tag: id }, ...(config ? { config } : {}) }));
  };

  beforeAll(async () => {
    install('greeter', { greeting: 'hi', times: 2 });
    install('misconfigured', { greeting: '' });
    install('unexpected', { greeting: 'hi', colour: 'blue' });
    install('schemaless', { anything: true }, PLUGIN_SOURCE.replace(/config: z\.object\([^\n]*\n/, '').replace("ctx.config.greeting.repeat(ctx.config.times)", "'hello'"));
    // Its second migration creates a table outside its prefix: both are rolled back.
    const migrations = `migrations: {
    '2026-12-01T0000_own': { async up({ db }) { await db.schema.createTable('trespasser_items').addColumn('v', 'text').execute(); } },
    '2026-12-02T0000_foreign': { async up({ db }) { await db.schema.createTable('users_shadow').addColumn('v', 'text').execute(); } },
  },
  config: z.object`;
    install('trespasser', { greeting: 'hi' }, PLUGIN_SOURCE.replace('config: z.object', migrations));
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), plugins.dir] });
  });
  afterAll(async () => {
    await t?.stop();
    plugins.remove();
  });

  it('gives a plugin its own config section, checked by its schema, and the kernel settings without secrets', async () => {
    const res = await t.request('GET', '/api/greeter');
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ greeting: 'hihi', org_id: 1, user: 'admin' });
    expect(res.body.kernel_settings).toContain('SQL_MAX_RESULT_BYTES');
    for (const secret of ['JWT_SECRET', 'PAT_HASH_KEY', 'VAULT_KEY', 'ADMIN_PASSWORD', 'DATABASE_URL', 'SMTP_URL']) expect(res.body.kernel_settings).not.toContain(secret);
  });

  it('refuses to load a plugin whose config section its schema does not accept, naming the field', async () => {
    const plugins = (await t.request('GET', '/api/plugins')).body as { id: string; state: string; reason_code: string; reason: string }[];
    const state = (id: string) => plugins.find((p) => p.id === id)!;
    expect(state('misconfigured')).toMatchObject({ state: 'failed', reason_code: 'KRN_ERR_PLUGIN_CONFIG_INVALID' });
    expect(state('misconfigured').reason).toMatch(/config\.greeting/);
    expect(state('unexpected')).toMatchObject({ state: 'failed', reason_code: 'KRN_ERR_PLUGIN_CONFIG_INVALID' });
    expect(state('unexpected').reason).toMatch(/colour/);
    expect(state('schemaless')).toMatchObject({ state: 'failed', reason_code: 'KRN_ERR_PLUGIN_CONFIG_INVALID' });
    expect(state('schemaless').reason).toMatch(/config\.anything/);
    expect((await t.request('GET', '/api/misconfigured')).status).toBe(404);
  });

  it('keeps a plugin to tables named with its id: a migration creating another name is refused and nothing of it applied', async () => {
    const plugins = (await t.request('GET', '/api/plugins')).body as { id: string; state: string; reason_code: string; reason: string }[];
    const trespasser = plugins.find((p) => p.id === 'trespasser')!;
    expect(trespasser).toMatchObject({ state: 'failed', reason_code: 'KRN_ERR_PLUGIN_TABLE_PREFIX' });
    expect(trespasser.reason).toMatch(/users_shadow/);
    const tables = (await t.kernel.storage.snapshotSchema()).map((table) => table.name);
    expect(tables).not.toContain('users_shadow');
    expect(tables).not.toContain('trespasser_items');
    expect(await t.kernel.migrator.status()).not.toContain('trespasser:2026-12-01T0000_own');
  });
});
