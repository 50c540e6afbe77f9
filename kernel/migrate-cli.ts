import 'dotenv/config';
import { parseArgs } from 'node:util';
import { Migrator, openStorage } from '../storage/index.ts';
import { loadSettings, SettingsError } from './config.ts';
import { KERNEL_PLUGIN_ID } from './kernel.ts';
import { kernelMigrations } from './migrations/index.ts';
import { resolveSecrets } from './secrets.ts';
import { pluginMigrationSources } from './registry/migration-sources.ts';

/**
 * `npm run migrate`                          apply every pending migration (kernel, then plugins)
 * `npm run migrate -- --rollback`            revert the newest applied migration
 * `npm run migrate -- --rollback --to X`     revert every migration applied after X (plugin:name; 0 = all)
 * `npm run migrate -- --status`              list applied migrations in order
 * `npm run migrate -- --governed-sql-roles`  print the statements creating governed SQL's roles,
 *                                            for an administrator where the platform may not
 */
async function main() {
  const { values } = parseArgs({ options: { rollback: { type: 'boolean' }, to: { type: 'string' }, status: { type: 'boolean' }, 'governed-sql-roles': { type: 'boolean' } } });
  if (values.to !== undefined && !values.rollback) throw new SettingsError('--to goes with --rollback');
  const settings = loadSettings(process.env);
  // The vault key derives the roles' passwords: read (or generated, as at start-up) only when they are asked for.
  const storage = openStorage(settings.DATABASE_URL, settings.DATA_DIR, values['governed-sql-roles'] ? { secretKey: resolveSecrets(settings).vaultKey } : {});
  try {
    if (values['governed-sql-roles']) {
      const organizations = await storage.db.selectFrom('organizations').select('id').orderBy('id').execute();
      (await storage.governedSqlRoleStatements(organizations.map((o) => Number(o.id)))).forEach((statement) => process.stdout.write(`${statement}\n`));
      return;
    }
    const migrator = new Migrator(storage);
    const { sources, problems } = await pluginMigrationSources(settings.MANIFESTS_DIR);
    problems.forEach((p) => process.stderr.write(`skipped: ${p}\n`));
    const all = [{ pluginId: KERNEL_PLUGIN_ID, migrations: kernelMigrations }, ...sources];
    if (values.status) {
      (await migrator.status()).forEach((name) => process.stdout.write(`${name}\n`));
      return;
    }
    const steps = values.rollback ? await migrator.rollback(all, values.to) : await migrator.migrateUp(all);
    if (!steps.length) process.stdout.write(values.rollback ? 'nothing to roll back\n' : 'database is up to date\n');
    for (const step of steps) process.stdout.write(`${step.direction === 'up' ? 'applied ' : 'reverted'} ${step.pluginId}:${step.name}\n`);
  } finally {
    await storage.close();
  }
}

main().catch((err) => {
  process.stderr.write(`migrate failed: ${(err as Error).message}\n`);
  process.exit(1);
});
