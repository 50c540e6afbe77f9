import 'dotenv/config';
import { parseArgs } from 'node:util';
import { Migrator, openStorage } from '../storage/index.ts';
import { loadSettings, SettingsError } from './config.ts';
import { KERNEL_PLUGIN_ID } from './kernel.ts';
import { kernelMigrations } from './migrations/index.ts';
import { pluginMigrationSources } from './registry/migration-sources.ts';

/**
 * `npm run migrate`                          apply every pending migration (kernel, then plugins)
 * `npm run migrate -- --rollback`            revert the newest applied migration
 * `npm run migrate -- --rollback --to X`     revert every migration applied after X (plugin:name; 0 = all)
 * `npm run migrate -- --status`              list applied migrations in order
 */
async function main() {
  const { values } = parseArgs({ options: { rollback: { type: 'boolean' }, to: { type: 'string' }, status: { type: 'boolean' } } });
  if (values.to !== undefined && !values.rollback) throw new SettingsError('--to goes with --rollback');
  const settings = loadSettings(process.env);
  const storage = openStorage(settings.DATABASE_URL, settings.DATA_DIR);
  try {
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
