import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratchDatabase, DIALECTS, REPO_ROOT, startTestKernel, tempDir, until, type TestKernel } from '../harness/index.ts';
import type { ScratchDatabase } from '../harness/scratch-database.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));


/** The ledger's migrations, as its author adds them version after version. */
const MIGRATIONS = {
  entries: `'2026-01-01T0000_entries': { async up({ db, storage }) { await storage.addIdColumn(db.schema.createTable('ledger_entries')).addColumn('text', 'text', (c) => c.notNull()).execute(); } },`,
  // Additive: a nullable column and an index.
  note: `'2026-01-02T0000_note': { async up({ db }) { await db.schema.alterTable('ledger_entries').addColumn('note', 'text').execute(); await db.schema.createIndex('ledger_entries_note').on('ledger_entries').column('note').execute(); } },`,
  // Not additive: the running version reads and writes `text`. It also creates a table, which must not survive the refusal.
  rename: `'2026-01-03T0000_rename': { async up({ db }) { await db.schema.createTable('ledger_tags').addColumn('tag', 'text').execute(); await db.schema.alterTable('ledger_entries').renameColumn('text', 'body').execute(); } },`,
};

/**
 * A third-party plugin in a folder outside the repository: a ledger with its own table. Each
 * version is its code (index.ts) and its manifest, written anew.
 */
function ledger(root: string) {
  fs.mkdirSync(path.join(root, 'ledger'), { recursive: true });
  fs.mkdirSync(path.join(root, 'manifests'), { recursive: true });
  return (version: string, options: { migrations: (keyof typeof MIGRATIONS)[]; initFails?: boolean; manifest?: Record<string, unknown> }) => {
    fs.writeFileSync(
      path.join(root, 'ledger/index.ts'),
      `import { definePlugin, defineRoute, kernelServices, reply, z } from 'data-platform/plugin-api';

export default definePlugin({
  deps: { storage: kernelServices.storage },
  migrations: { ${options.migrations.map((m) => MIGRATIONS[m]).join('\n')} },
  init: ({ storage }) => {
    if (${options.initFails === true}) throw new Error('version ${version} cannot start');
    return {
      routes: [
        defineRoute({
          method: 'get', path: '', summary: 'Entries', security: 'none',
          responses: { 200: { description: 'The version and its entries', schema: z.object({ version: z.string(), entries: z.array(z.string()) }) } },
          handler: async () => ({ version: '${version}', entries: (await storage.db.selectFrom('ledger_entries').select('text').orderBy('id').execute()).map((r) => r.text) }),
        }),
        defineRoute({
          method: 'post', path: '', summary: 'Add an entry', security: 'none',
          request: { body: z.object({ text: z.string() }) },
          responses: { 201: { description: 'Added' } },
          handler: async ({ body }) => {
            await storage.db.insertInto('ledger_entries').values({ text: body.text }).execute();
            return reply(201);
          },
        }),
      ],
    };
  },
});
`,
    );
    fs.writeFileSync(
      path.join(root, 'manifests/ledger.json'),
      JSON.stringify({ id: 'ledger', version, kind: 'router', entry: '../ledger/index.ts', router: { prefix: '/api/ledger', tag: 'ledger' }, ...options.manifest }),
    );
  };
}

describe.each(DIALECTS)('reloads that cannot half-apply (%s)', (dialect) => {
  let t: TestKernel;
  const folder = tempDir('dp-safe-reload-');
  const write = ledger(folder.dir);
  const reload = () => t.request('POST', '/api/plugins/ledger/reload');
  const served = async () => (await t.request('GET', '/api/ledger', { token: null })).body;
  const status = async () => (await t.request('GET', '/api/plugins/ledger')).body;
  const applied = async () => (await t.kernel.migrator.status()).filter((m) => m.startsWith('ledger:'));
  const table = async (name: string) => (await t.kernel.storage.snapshotSchema()).find((s) => s.name === name);
  const columnsOf = async (name: string) => (await table(name))?.columns.map((c) => c.name);

  /** The old version serves whole: reads and writes its table as before. */
  async function expectVersionOneWhole(entries: string[]) {
    expect(await served()).toEqual({ version: '1.0.0', entries });
    const added = await t.request('POST', '/api/ledger', { token: null, body: { text: `entry ${entries.length + 1}` } });
    expect(added.status, added.text).toBe(201);
    entries.push(`entry ${entries.length + 1}`);
    expect(await served()).toEqual({ version: '1.0.0', entries });
    expect(await status()).toMatchObject({ state: 'loaded', version: '1.0.0', reason: null });
  }

  beforeAll(async () => {
    write('1.0.0', { migrations: ['entries'] });
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), path.join(folder.dir, 'manifests')] });
  });
  afterAll(async () => {
    await t?.stop();
    folder.remove();
  });

  const entries: string[] = [];

  it('checks and imports a new version before its migrations run: one refused by its checks applies none', async () => {
    await expectVersionOneWhole(entries);
    // A connector type without the shape connectors.types asks for, declared in the manifest.
    write('1.1.0', { migrations: ['entries', 'note'], manifest: { depends_on: ['connectors'], contributes: { 'connectors.types': [{ type: 'ledger_half' }] } } });
    const res = await reload();
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ code: 'KRN_ERR_PLUGIN_CONTRIBUTION_INVALID' });
    expect(res.body.detail).toMatch(/^reload of plugin "ledger" failed: plugin "ledger" contributes to extension point "connectors\.types" something it does not accept/);
    expect(await applied()).toEqual(['ledger:2026-01-01T0000_entries']);
    expect(await columnsOf('ledger_entries')).toEqual(['id', 'text']);
    await expectVersionOneWhole(entries);
  });

  it('keeps the old version whole when the new one fails after an additive migration, which stays applied', async () => {
    write('2.0.0', { migrations: ['entries', 'note'], initFails: true });
    const res = await reload();
    expect(res.status).toBe(422);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ code: 'KRN_ERR_PLUGIN_INIT', detail: 'reload of plugin "ledger" failed: plugin "ledger" failed to initialise: version 2.0.0 cannot start; its migrations 2026-01-02T0000_note only add to the schema and stay applied' });
    // The added column and index are there, and the old version reads and writes beside them.
    expect(await applied()).toEqual(['ledger:2026-01-01T0000_entries', 'ledger:2026-01-02T0000_note']);
    expect(await columnsOf('ledger_entries')).toEqual(['id', 'text', 'note']);
    expect((await table('ledger_entries'))!.indexes).toContain('ledger_entries_note');
    await expectVersionOneWhole(entries);
    expect((await status()).last_reload_error).toMatch(/version 2\.0\.0 cannot start/);
  });

  it('refuses a new version whose migrations are not additive, rolls them back and says a restart applies them', async () => {
    write('3.0.0', { migrations: ['entries', 'note', 'rename'] });
    const res = await reload();
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('KRN_ERR_PLUGIN_MIGRATION_NOT_ADDITIVE');
    expect(res.body.detail).toBe(
      'reload of plugin "ledger" failed: plugin "ledger": a hot reload applies only migrations that add to the schema, and 2026-01-03T0000_rename drops or renames column ledger_entries.text; adds ledger_entries.body NOT NULL without a default; nothing was applied and the running version keeps serving: restart the server to apply it',
    );
    // Nothing of the refused migration is left: not its table, not its rename, not its record.
    expect(await applied()).toEqual(['ledger:2026-01-01T0000_entries', 'ledger:2026-01-02T0000_note']);
    expect(await columnsOf('ledger_entries')).toEqual(['id', 'text', 'note']);
    expect(await table('ledger_tags')).toBeUndefined();
    await expectVersionOneWhole(entries);
    expect(await status()).toMatchObject({ reason_code: null, last_reload_error: expect.stringMatching(/restart the server to apply it$/) });

    // A restart applies it: a new instance starting over the same database loads the new version.
    const restarted = await t.peer();
    const listed = (await restarted.request('GET', '/api/plugins/ledger')).body;
    expect(listed).toMatchObject({ state: 'loaded', version: '3.0.0' });
    expect(await columnsOf('ledger_entries')).toEqual(['id', 'body', 'note']);
    expect(await table('ledger_tags')).toBeDefined();
  });
});

/**
 * Code watching is tested on the server process itself (tsx kernel/main.ts): only there are the
 * kernel's module hooks installed that make a reload evaluate a plugin's modules afresh (under
 * vitest's module runner an imported module keeps its first version).
 */
describe.each(DIALECTS)('watching plugin code (%s)', (dialect) => {
  const folder = tempDir('dp-watch-code-');
  const dir = path.join(folder.dir, 'greeter');
  let server: ChildProcess | undefined;
  let output = '';
  let database: ScratchDatabase;
  let baseUrl: string;
  let token: string;
  const writeGreeting = (text: string) => fs.writeFileSync(path.join(dir, 'lib/greeting.ts'), `export const greeting = ${JSON.stringify(text)};\n`);
  const writeEntry = (suffix: string) =>
    fs.writeFileSync(
      path.join(dir, 'index.ts'),
      `import { definePlugin, defineRoute } from 'data-platform/plugin-api';
import { greeting } from './lib/greeting.ts';

export default definePlugin({
  deps: {},
  init: () => ({ routes: [defineRoute({ method: 'get', path: '', summary: 'Greets', security: 'none', responses: { 200: { description: 'A greeting' } }, handler: () => ({ greeting: greeting + ${JSON.stringify(suffix)} }) })] }),
});
`,
    );
  const get = async (route: string) => {
    const res = await fetch(`${baseUrl}${route}`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) });
    return res.json();
  };
  const greeting = async () => (await get('/api/code-greeter')).greeting;
  const status = () => get('/api/plugins/code_greeter');

  beforeAll(async () => {
    fs.mkdirSync(path.join(dir, 'lib'), { recursive: true });
    // ES modules: Node re-evaluates them under a new URL (CommonJS would keep its require cache).
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
    writeGreeting('hello');
    writeEntry('!');
    fs.mkdirSync(path.join(folder.dir, 'manifests'));
    fs.writeFileSync(
      path.join(folder.dir, 'manifests/code_greeter.json'),
      JSON.stringify({ id: 'code_greeter', version: '1.0.0', kind: 'router', entry: '../greeter/index.ts', router: { prefix: '/api/code-greeter', tag: 'code_greeter' } }),
    );
    database = await createScratchDatabase(dialect, folder.dir);
    const jwtSecret = crypto.randomBytes(32).toString('base64url');
    server = spawn(path.join(REPO_ROOT, 'node_modules/.bin/tsx'), ['kernel/main.ts'], {
      cwd: REPO_ROOT,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATA_DIR: folder.dir,
        DATABASE_URL: database.url,
        JWT_SECRET: jwtSecret,
        PORT: '0',
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
        ADMIN_PASSWORD: 'admin-password-1',
        MANIFESTS_DIR: [path.join(REPO_ROOT, 'manifests'), path.join(folder.dir, 'manifests')].join(path.delimiter),
        PLUGIN_WATCH: 'true',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    server.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    server.stderr!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    const listening = await until(async () => /listening on (http:\/\/\S+)/.exec(output), (match) => match !== null, 30_000);
    if (!listening) throw new Error(`the server did not start:\n${output}`);
    baseUrl = listening[1];
    token = await new SignJWT({ user_id: 1, role: 'admin' }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(jwtSecret));
  });
  afterAll(async () => {
    if (server && server.exitCode === null) {
      const exited = new Promise((resolve) => server!.once('close', resolve));
      process.kill(-server.pid!, 'SIGTERM');
      await exited;
    }
    await database?.drop();
    folder.remove();
  });

  it('reloads a plugin when its entry module is edited, though its manifest is unchanged', async () => {
    expect(await greeting()).toBe('hello!');
    const before = await status();
    expect(before).toMatchObject({ state: 'loaded', version: '1.0.0' });
    writeEntry('?');
    expect(await until(greeting, (g) => g === 'hello?')).toBe('hello?');
    expect(Date.parse((await status()).loaded_at)).toBeGreaterThan(Date.parse(before.loaded_at));
  });

  it('reloads a plugin when a module in a subfolder of its code is edited, and not for files that are not code', async () => {
    const before = (await status()).loaded_at;
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'not code');
    fs.mkdirSync(path.join(dir, '.cache'), { recursive: true });
    fs.writeFileSync(path.join(dir, '.cache/state.json'), '{}');
    await sleep(600);
    expect((await status()).loaded_at).toBe(before);
    writeGreeting('good morning');
    expect(await until(greeting, (g) => g === 'good morning?')).toBe('good morning?');
  });

  it('keeps the running version when an edit breaks the code, and loads the fix', async () => {
    fs.writeFileSync(path.join(dir, 'lib/greeting.ts'), 'export const greeting = ;\n');
    const broken = await until(status, (s) => s.last_reload_error !== null);
    expect(broken).toMatchObject({ state: 'loaded', reason: null });
    expect(broken.last_reload_error).toMatch(/could not be imported/);
    expect(await greeting()).toBe('good morning?');
    writeGreeting('fixed');
    expect(await until(greeting, (g) => g === 'fixed?')).toBe('fixed?');
    expect((await status()).last_reload_error).toBeNull();
  });
});
