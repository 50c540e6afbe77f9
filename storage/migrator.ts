import type { Kysely } from 'kysely';
import type { Storage, TableSnapshot } from './types.ts';

const TABLE = 'kernel_migrations';

/** What a migration may use: the transaction it runs in and the portable column vocabulary. */
export interface MigrationContext {
  db: Kysely<any>;
  storage: Pick<Storage, 'types' | 'addIdColumn' | 'encodeJson' | 'now' | 'guardAppendOnly' | 'unguardAppendOnly' | 'trackChanges' | 'untrackChanges' | 'fullText'>;
}

/**
 * One schema change. Migrations are frozen in time: they import nothing from the current code of
 * their plugin, so an old migration keeps meaning what it meant when it was applied.
 */
export interface Migration {
  up(ctx: MigrationContext): Promise<void>;
  down?(ctx: MigrationContext): Promise<void>;
}

/** A plugin's migrations, keyed by name; names sort in the order they apply (ISO-date prefixes). */
export interface MigrationSource {
  pluginId: string;
  migrations: Record<string, Migration>;
}

export interface MigrationStep {
  pluginId: string;
  name: string;
  direction: 'up' | 'down';
}

interface AppliedRow {
  id: number;
  plugin_id: string;
  name: string;
}

export class MigrationError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

/** Applies and reverts plugin-namespaced migrations, recording each in `kernel_migrations`. */
export class Migrator {
  constructor(private readonly storage: Storage) {}

  /** Applies every pending migration of the sources, in the order given, each in its own transaction. Applies nothing twice. */
  async migrateUp(sources: MigrationSource[]): Promise<MigrationStep[]> {
    return this.storage.withMigrationLock(async () => {
      const steps: MigrationStep[] = [];
      for (const { pluginId, name, migration } of await this.pending(sources)) {
        await this.run(pluginId, name, migration, 'up');
        steps.push({ pluginId, name, direction: 'up' });
      }
      return steps;
    });
  }

  /**
   * Applies every pending migration of the sources in one transaction, then hands `check` the schema
   * as it was before them and as it is after them, still inside that transaction. If `check` (or a
   * migration) throws, all of them are rolled back (SQLite and Postgres both have transactional
   * DDL) and the error is thrown on as it is.
   */
  async migrateUpChecked(sources: MigrationSource[], check: (before: TableSnapshot[], after: TableSnapshot[], steps: MigrationStep[]) => void): Promise<MigrationStep[]> {
    return this.storage.withMigrationLock(async () => {
      const pending = await this.pending(sources);
      if (pending.length === 0) return [];
      const { storage } = this;
      return storage.transaction(async (trx) => {
        const before = await storage.snapshotSchema(trx);
        const steps: MigrationStep[] = [];
        for (const { pluginId, name, migration } of pending) {
          try {
            await migration.up({ db: trx, storage });
          } catch (err) {
            throw new MigrationError('KRN_ERR_MIGRATION_FAILED', `migration ${pluginId}:${name} (up) failed: ${(err as Error).message}`);
          }
          await trx.insertInto(TABLE).values({ plugin_id: pluginId, name, applied_at: storage.now() }).execute();
          steps.push({ pluginId, name, direction: 'up' });
        }
        check(before, await storage.snapshotSchema(trx), steps);
        return steps;
      });
    });
  }

  /** The migrations of the sources not applied yet, in order; one sorting before an applied one of its plugin is refused. */
  private async pending(sources: MigrationSource[]): Promise<{ pluginId: string; name: string; migration: Migration }[]> {
    await this.ensureTable();
    const applied = await this.appliedRows();
    const pending: { pluginId: string; name: string; migration: Migration }[] = [];
    for (const source of sources) {
      const done = new Set(applied.filter((r) => r.plugin_id === source.pluginId).map((r) => r.name));
      const names = Object.keys(source.migrations).sort();
      const lastApplied = names.filter((n) => done.has(n)).at(-1);
      for (const name of names) {
        if (done.has(name)) continue;
        if (lastApplied && name < lastApplied) {
          throw new MigrationError('KRN_ERR_MIGRATION_ORDER', `migration ${source.pluginId}:${name} sorts before the already applied ${source.pluginId}:${lastApplied}; give it a later name`);
        }
        pending.push({ pluginId: source.pluginId, name, migration: source.migrations[name] });
      }
    }
    return pending;
  }

  /**
   * Reverts applied migrations, newest first. Without `to` only the newest one; with `to` =
   * `plugin:name` every migration applied after that one; with `to` = `0` all of them.
   */
  async rollback(sources: MigrationSource[], to?: string): Promise<MigrationStep[]> {
    return this.storage.withMigrationLock(async () => {
      await this.ensureTable();
      const applied = await this.appliedRows();
      let targets: AppliedRow[];
      if (to === undefined) {
        targets = applied.slice(-1);
      } else if (to === '0') {
        targets = [...applied];
      } else {
        const anchor = applied.find((r) => `${r.plugin_id}:${r.name}` === to);
        if (!anchor) throw new MigrationError('KRN_ERR_MIGRATION_UNKNOWN', `no applied migration named "${to}" (expected plugin:name, as listed by npm run migrate -- --status)`);
        targets = applied.filter((r) => r.id > anchor.id);
      }
      const byPlugin = new Map(sources.map((s) => [s.pluginId, s.migrations]));
      const steps: MigrationStep[] = [];
      for (const row of targets.reverse()) {
        const migration = byPlugin.get(row.plugin_id)?.[row.name];
        if (!migration) throw new MigrationError('KRN_ERR_MIGRATION_MISSING', `applied migration ${row.plugin_id}:${row.name} is not provided by any loaded plugin, so it cannot be reverted`);
        if (!migration.down) throw new MigrationError('KRN_ERR_MIGRATION_IRREVERSIBLE', `migration ${row.plugin_id}:${row.name} has no down step`);
        await this.run(row.plugin_id, row.name, migration, 'down');
        steps.push({ pluginId: row.plugin_id, name: row.name, direction: 'down' });
      }
      return steps;
    });
  }

  /** Applied migrations in the order they were applied, as `plugin:name`. */
  async status(): Promise<string[]> {
    await this.ensureTable();
    return (await this.appliedRows()).map((r) => `${r.plugin_id}:${r.name}`);
  }

  private async run(pluginId: string, name: string, migration: Migration, direction: 'up' | 'down') {
    const { storage } = this;
    try {
      await storage.transaction(async (trx) => {
        const ctx: MigrationContext = { db: trx, storage };
        if (direction === 'up') {
          await migration.up(ctx);
          await trx.insertInto(TABLE).values({ plugin_id: pluginId, name, applied_at: storage.now() }).execute();
        } else {
          await migration.down!(ctx);
          await trx.deleteFrom(TABLE).where('plugin_id', '=', pluginId).where('name', '=', name).execute();
        }
      });
    } catch (err) {
      if (err instanceof MigrationError) throw err;
      throw new MigrationError('KRN_ERR_MIGRATION_FAILED', `migration ${pluginId}:${name} (${direction}) failed: ${(err as Error).message}`);
    }
  }

  private async appliedRows(): Promise<AppliedRow[]> {
    return (await this.storage.db.selectFrom(TABLE).select(['id', 'plugin_id', 'name']).orderBy('id').execute()) as AppliedRow[];
  }

  private async ensureTable() {
    const { storage } = this;
    await storage
      .addIdColumn(storage.db.schema.createTable(TABLE).ifNotExists())
      .addColumn('plugin_id', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('applied_at', storage.types.timestamp, (c) => c.notNull())
      .addUniqueConstraint('kernel_migrations_plugin_name', ['plugin_id', 'name'])
      .execute();
  }
}
