import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { loadSettings } from '../../kernel/config.ts';
import { kernelMigrations } from '../../kernel/migrations/index.ts';
import { resolveSecrets } from '../../kernel/secrets.ts';
import { pluginMigrationSources } from '../../kernel/registry/migration-sources.ts';
import { Migrator, openStorage, type Migration, type MigrationSource, type Storage } from '../../storage/index.ts';
import { createScratchDatabase, DIALECTS, REPO_ROOT, tempDir } from '../harness/index.ts';
import migratingFixture from '../fixtures/plugins/migrating/index.ts';

const run = promisify(execFile);

const table = (name: string): Migration => ({
  up: async ({ db, storage }) => void (await storage.addIdColumn(db.schema.createTable(name)).addColumn('label', 'text').execute()),
  down: async ({ db }) => void (await db.schema.dropTable(name).execute()),
});

describe.each(DIALECTS)('migrations (%s)', (dialect) => {
  let storage: Storage;
  let migrator: Migrator;
  let drop: () => Promise<void>;
  const temp = tempDir();
  let sources: MigrationSource[];

  beforeEach(async () => {
    const database = await createScratchDatabase(dialect, temp.dir);
    drop = database.drop;
    storage = openStorage(database.url, temp.dir);
    migrator = new Migrator(storage);
    const plugins = await pluginMigrationSources([path.join(REPO_ROOT, 'manifests')]);
    expect(plugins.problems).toEqual([]);
    sources = [{ pluginId: 'kernel', migrations: kernelMigrations }, ...plugins.sources, { pluginId: 'migrating', migrations: migratingFixture.migrations! }];
  });
  afterEach(async () => {
    await storage.close();
    await drop();
  });

  it('goes up, down to nothing and up again to the same schema, applying nothing twice', async () => {
    const applied = await migrator.migrateUp(sources);
    expect(applied.map((s) => `${s.pluginId}:${s.name}`)).toContain('migrating:2026-01-01T0000_notes');
    const first = await storage.snapshotSchema();
    expect(first.map((t) => t.name)).toEqual(expect.arrayContaining(['users', 'organizations', 'organization_members', 'personal_access_tokens', 'groups', 'audit_log', 'migrating_notes', 'kernel_migrations']));
    expect(await migrator.migrateUp(sources)).toEqual([]);

    const reverted = await migrator.rollback(sources, '0');
    expect(reverted.map((s) => s.direction)).toEqual(applied.map(() => 'down'));
    expect((await storage.snapshotSchema()).map((t) => t.name)).toEqual(['kernel_migrations']);
    expect(await migrator.status()).toEqual([]);

    await migrator.migrateUp(sources);
    expect(await storage.snapshotSchema()).toEqual(first);
  });

  it('rolls back the newest migration, or everything after a named one', async () => {
    const extra = { pluginId: 'extra', migrations: { '2026-01-01_a': table('extra_a'), '2026-01-02_b': table('extra_b') } };
    await migrator.migrateUp([...sources, extra]);
    expect(await migrator.rollback([...sources, extra])).toEqual([{ pluginId: 'extra', name: '2026-01-02_b', direction: 'down' }]);
    expect((await storage.snapshotSchema()).map((t) => t.name)).not.toContain('extra_b');

    const appliedAfterIdentity = (await migrator.status()).slice(1).reverse();
    expect(appliedAfterIdentity).toEqual(expect.arrayContaining(['extra:2026-01-01_a', 'migrating:2026-01-01T0000_notes', 'kernel:2026-11-22T0000_governance']));
    const reverted = await migrator.rollback([...sources, extra], 'kernel:2026-11-21T0000_identity');
    expect(reverted.map((s) => `${s.pluginId}:${s.name}`)).toEqual(appliedAfterIdentity);
    expect(await migrator.status()).toEqual(['kernel:2026-11-21T0000_identity']);
    await expect(migrator.rollback(sources, 'kernel:no-such-migration')).rejects.toMatchObject({ code: 'KRN_ERR_MIGRATION_UNKNOWN' });
  });

  it('keeps migrations of different plugins apart even when their names are equal', async () => {
    const one = { pluginId: 'one', migrations: { '2026-01-01_init': table('one_items') } };
    const two = { pluginId: 'two', migrations: { '2026-01-01_init': table('two_items') } };
    expect(await migrator.migrateUp([one, two])).toHaveLength(2);
    expect(await migrator.status()).toEqual(['one:2026-01-01_init', 'two:2026-01-01_init']);
  });

  it('refuses a migration named before one already applied', async () => {
    await migrator.migrateUp([{ pluginId: 'p', migrations: { '2026-02-01_b': table('p_b') } }]);
    await expect(migrator.migrateUp([{ pluginId: 'p', migrations: { '2026-02-01_b': table('p_b'), '2026-01-01_a': table('p_a') } }])).rejects.toMatchObject({
      code: 'KRN_ERR_MIGRATION_ORDER',
    });
    expect((await storage.snapshotSchema()).map((t) => t.name)).not.toContain('p_a');
  });

  it('leaves nothing half-applied when a migration fails', async () => {
    const failing: Migration = {
      up: async (ctx) => {
        await table('half_done').up(ctx);
        throw new Error('second statement failed');
      },
    };
    await expect(migrator.migrateUp([{ pluginId: 'p', migrations: { '2026-01-01_half': failing } }])).rejects.toMatchObject({
      code: 'KRN_ERR_MIGRATION_FAILED',
      message: expect.stringContaining('p:2026-01-01_half'),
    });
    expect((await storage.snapshotSchema()).map((t) => t.name)).not.toContain('half_done');
    expect(await migrator.status()).toEqual([]);
  });

  it('refuses to roll back a migration without a down step and reverts nothing', async () => {
    const oneWay = { pluginId: 'p', migrations: { '2026-01-01_one_way': { up: table('one_way').up } } };
    await migrator.migrateUp([oneWay]);
    await expect(migrator.rollback([oneWay])).rejects.toMatchObject({ code: 'KRN_ERR_MIGRATION_IRREVERSIBLE' });
    expect(await migrator.status()).toEqual(['p:2026-01-01_one_way']);
  });

  // Seven processes, each loading every plugin and its migrations: about a minute on a loaded CI machine.
  it('is driven by npm run migrate, with --status and --rollback [--to]', async () => {
    const database = await createScratchDatabase(dialect, temp.dir);
    const env = { ...process.env, DATABASE_URL: database.url, DATA_DIR: temp.dir, MANIFESTS_DIR: path.join(REPO_ROOT, 'manifests') };
    const cli = (...args: string[]) => run(path.join(REPO_ROOT, 'node_modules/.bin/tsx'), ['kernel/migrate-cli.ts', ...args], { cwd: REPO_ROOT, env });
    try {
      expect((await cli()).stdout).toContain('applied  kernel:2026-11-21T0000_identity');
      expect((await cli()).stdout).toContain('database is up to date');
      const applied = (await cli('--status')).stdout.trim().split('\n');
      // Kernel first, then the repository's plugins in dependency order.
      expect(applied.slice(0, 2)).toEqual(['kernel:2026-11-21T0000_identity', 'kernel:2026-11-22T0000_governance']);
      expect(applied.indexOf('projects:2026-11-22T0100_projects')).toBeLessThan(applied.indexOf('datasets:2026-11-22T0200_datasets'));
      expect((await cli('--rollback')).stdout.trim()).toBe(`reverted ${applied.at(-1)}`);
      expect((await cli('--rollback', '--to', '0')).stdout).toContain('reverted kernel:2026-11-21T0000_identity');
      expect((await cli('--status')).stdout.trim()).toBe('');
      await expect(cli('--to', '0')).rejects.toMatchObject({ stderr: expect.stringContaining('--to goes with --rollback') });
    } finally {
      await database.drop();
    }
  }, 180_000);
});

describe('SQLite files', () => {
  const temp = tempDir();
  const modeOf = (file: string) => fs.statSync(file).mode & 0o777;
  /** What a mode becomes under this process's umask (a stricter umask is honoured). */
  const masked = (mode: number) => mode & ~process.umask();
  afterAll(() => temp.remove());

  it('creates DATA_DIR 0700 and the database, its -wal and its -shm 0600', async () => {
    const dataDir = path.join(temp.dir, 'fresh', 'data');
    resolveSecrets(loadSettings({ DATA_DIR: dataDir }));
    expect(modeOf(dataDir)).toBe(masked(0o700));
    expect(modeOf(path.join(temp.dir, 'fresh'))).toBe(masked(0o700));
    const storage = openStorage(undefined, dataDir);
    try {
      await sql`create table probe (id integer primary key, label text)`.execute(storage.db);
      await sql`insert into probe (label) values ('x')`.execute(storage.db);
      for (const name of ['platform.db', 'platform.db-wal', 'platform.db-shm']) expect(modeOf(path.join(dataDir, name)), name).toBe(masked(0o600));
    } finally {
      await storage.close();
    }
    // A database elsewhere (sqlite:PATH): its folder too.
    const elsewhere = path.join(temp.dir, 'elsewhere', 'db');
    const other = openStorage(`sqlite:${path.join(elsewhere, 'x.db')}`, dataDir);
    await other.close();
    expect(modeOf(elsewhere)).toBe(masked(0o700));
    expect(modeOf(path.join(elsewhere, 'x.db'))).toBe(masked(0o600));
  });

  it('tightens an existing database file (and -wal, -shm) that group or others may read, keeping a stricter one', async () => {
    const dataDir = path.join(temp.dir, 'old');
    fs.mkdirSync(dataDir, { recursive: true });
    const file = path.join(dataDir, 'platform.db');
    const first = openStorage(undefined, dataDir);
    await sql`create table probe (id integer primary key)`.execute(first.db);
    await first.close();
    fs.chmodSync(file, 0o644);
    fs.writeFileSync(`${file}-wal`, '');
    fs.chmodSync(`${file}-wal`, 0o666);
    const reopened = openStorage(undefined, dataDir);
    try {
      expect(modeOf(file)).toBe(0o600);
      expect(modeOf(`${file}-wal`)).toBe(0o600);
      await sql`insert into probe default values`.execute(reopened.db);
      expect(modeOf(`${file}-shm`)).toBe(0o600);
    } finally {
      await reopened.close();
    }
    const stricter = path.join(dataDir, 'strict.db');
    fs.writeFileSync(stricter, '');
    fs.chmodSync(stricter, 0o400);
    try {
      await openStorage(`sqlite:${stricter}`, dataDir).close(); // a read-only file may not open at all
    } catch {}
    expect(modeOf(stricter)).toBe(0o400);
  });
});
