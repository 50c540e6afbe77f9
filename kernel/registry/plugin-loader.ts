import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import type { Migration, Migrator } from '../../storage/index.ts';
import { nonAdditiveChanges } from './additive-schema.ts';
import { definePlugin, isPluginDefinition, type Contribution, type Disposable, type PluginContext, type PluginContributions, type PluginDefinition, type ServiceRef } from '../plugin-api.ts';
import { KERNEL_OWNER, type OfferingTable } from './offerings.ts';
import { LoadedPlugin } from './loaded-plugin.ts';
import type { ServiceLifecycle } from './lifecycle.ts';
import { extraManifestKeys, type PluginManifest } from './manifest.ts';
import { PluginLoadError, pluginErrors } from './plugin-errors.ts';
import { satisfies } from 'semver';
import { RELEASE as KERNEL_VERSION } from '../release.ts';

export interface LoaderEnvironment {
  logger: Logger;
  migrator: Migrator;
  initTimeoutMs: number;
  /**
   * The service a reference names, scoped to the plugin; undefined when no such service exists.
   * What the plugin registers through it starts when this version activates and is undone when it unloads.
   */
  resolveService(ref: ServiceRef<unknown>, pluginId: string, lifecycle: ServiceLifecycle): unknown;
}

export interface LoadRequest {
  manifest: PluginManifest;
  file: string;
  /** Every plugin this one depends on, directly or not: the only extension-point owners it may use. */
  dependencies: Set<string>;
  offerings: OfferingTable;
  /** Distinct per load, so a reload imports the entry module afresh instead of Node's cached copy. */
  generation: number;
  /** A hot reload: only migrations that add to the schema may apply (others wait for a restart). */
  additiveOnly: boolean;
}

/**
 * Imports the module a manifest names and checks what it declares, applies its migrations, runs its
 * init and collects what it contributes.
 */
export async function loadPlugin(request: LoadRequest, env: LoaderEnvironment): Promise<LoadedPlugin> {
  const { manifest, file, offerings, dependencies, generation } = request;
  // Refused before any of the plugin's code runs.
  if (manifest.kernel && !satisfies(KERNEL_VERSION, manifest.kernel, { includePrerelease: true })) throw pluginErrors.kernelVersion(manifest.id, manifest.kernel, KERNEL_VERSION);
  const entryFile = manifest.entry ? path.resolve(path.dirname(file), manifest.entry) : null;
  // A plugin without an entry module contributes from its manifest only; its module paths are relative to the manifest.
  const dir = path.dirname(entryFile ?? file);
  const importFresh = async (modulePath: string) => import(`${pathToFileURL(modulePath).href}?generation=${generation}`);

  let definition: PluginDefinition = MANIFEST_ONLY;
  if (entryFile) {
    let exported: unknown;
    try {
      exported = (await importFresh(entryFile)).default;
    } catch (err) {
      throw pluginErrors.importFailed(manifest.entry!, (err as Error).message);
    }
    if (!isPluginDefinition(exported)) throw pluginErrors.notAPlugin(manifest.entry!);
    definition = exported;
  }

  const disposables: Disposable[] = [];
  const activations: (() => Disposable | void)[] = [];
  const lifecycle: ServiceLifecycle = { onDispose: (dispose) => void disposables.push(dispose), onActivate: (start) => void activations.push(start) };
  const services: Record<string, unknown> = {};
  const unknown: string[] = [];
  for (const [name, ref] of Object.entries(definition.deps)) {
    const service = env.resolveService(ref, manifest.id, lifecycle);
    if (service === undefined) unknown.push(ref.id);
    services[name] = service;
  }
  if (unknown.length) throw pluginErrors.serviceUnknown(manifest.id, unknown);
  const config = pluginConfig(manifest, definition);

  const checkPoint = (pointId: string) => {
    const owner = offerings.pointOwner(pointId);
    if (!owner || (owner !== KERNEL_OWNER && !dependencies.has(owner))) throw pluginErrors.extensionPointMissing(manifest.id, pointId);
  };
  const contribution = (value: unknown): Contribution<unknown> => ({
    value,
    pluginId: manifest.id,
    dir,
    importModule: (modulePath) => importFresh(path.resolve(dir, modulePath)),
  });
  /** Contributions whose owner has not decided yet: the load waits for them (`settle`) before it counts as done. */
  const pending: Promise<void>[] = [];
  const contribute = (pointId: string, value: unknown) => {
    checkPoint(pointId);
    const accepted = offerings.contribute(pointId, contribution(value)).then((undo) => void (undo && disposables.push(undo)));
    accepted.catch(() => undefined); // awaited by settle(); not an unhandled rejection meanwhile
    pending.push(accepted);
  };
  const settle = async () => {
    const refused = (await Promise.allSettled(pending.splice(0))).find((r) => r.status === 'rejected');
    if (refused) throw refused.reason;
  };
  const context: PluginContext<unknown> = {
    pluginId: manifest.id,
    config,
    manifest,
    dir,
    onDispose: (dispose) => void disposables.push(dispose),
    provideExtensionPoint: (point, accept, ownerHooks) => {
      const owner = offerings.pointOwner(point.id);
      if (owner && owner !== manifest.id) throw pluginErrors.extensionPointConflict(point.id, owner, manifest.id);
      offerings.providePoint(point as never, manifest.id, accept as never, ownerHooks as never);
    },
    contribute: (point, value) => contribute(point.id, value),
    provideService: (ref, implementation) => {
      const owner = offerings.serviceOwner(ref.id);
      if (owner && owner !== manifest.id) throw pluginErrors.serviceConflict(ref.id, owner, manifest.id);
      offerings.provideService(ref.id, manifest.id, implementation);
    },
    useService: (ref) => {
      const owner = offerings.serviceOwner(ref.id);
      if (!owner || !dependencies.has(owner)) throw pluginErrors.serviceMissing(manifest.id, ref.id);
      return offerings.service(ref.id) as never;
    },
  };

  /** Migrations this load applied: on a reload that fails after them, the reason says they stay. */
  const applied: string[] = [];
  try {
    // Everything that can be checked without running the plugin is checked before its migrations
    // change the schema: a version refused here leaves nothing behind.
    const declared = declaredContributions(manifest, offerings);
    for (const [pointId, entries] of declared) {
      checkPoint(pointId);
      for (const value of entries) await offerings.check(pointId, contribution(value));
    }
    if (definition.migrations) applied.push(...(await migrate(manifest, definition.migrations, request.additiveOnly, env.migrator)));

    const contributions = await withTimeout(
      Promise.resolve(definition.init(services as never, context)),
      env.initTimeoutMs,
      () => pluginErrors.timeout(manifest.id, env.initTimeoutMs),
    );
    for (const [pointId, entries] of declared) entries.forEach((entry) => contribute(pointId, entry));
    await settle();
    const plugin = new LoadedPlugin(manifest, file, dir, (contributions as PluginContributions | undefined)?.routes ?? [], env.logger);
    disposables.forEach((d) => plugin.addDisposable(d));
    activations.forEach((start) => plugin.addActivation(start));
    return plugin;
  } catch (err) {
    await Promise.allSettled(pending); // what is still being accepted is withdrawn with the rest
    for (const dispose of disposables.reverse()) await Promise.resolve(dispose()).catch(() => undefined);
    offerings.removeOwner(manifest.id);
    const error = err instanceof PluginLoadError ? err : pluginErrors.initFailed(manifest.id, (err as Error).message);
    throw request.additiveOnly && applied.length ? pluginErrors.additiveMigrationsKept(error, applied) : error;
  }
}

/**
 * Applies the plugin's pending migrations. On a hot reload (`additiveOnly`) they run in one
 * transaction and are rolled back and refused unless they only add to the schema: the version
 * still serving keeps working against it, whether the new one then starts or fails.
 */
/**
 * Applies the plugin's pending migrations in one transaction, rolled back whole when they create a
 * table outside the plugin's prefix (its own tables are its own, and no other plugin's) or, on a
 * hot reload, change the schema other than by adding to it.
 */
async function migrate(manifest: PluginManifest, migrations: Record<string, Migration>, additiveOnly: boolean, migrator: Migrator): Promise<string[]> {
  const pluginId = manifest.id;
  const prefix = pluginId.replaceAll('-', '_');
  const owns = (table: string) => table === prefix || table.startsWith(`${prefix}_`) || manifest.tables.includes(table);
  try {
    const steps = await migrator.migrateUpChecked([{ pluginId, migrations }], (before, after, pending) => {
      const existed = new Set(before.map((t) => t.name));
      const foreign = after.map((t) => t.name).filter((name) => !existed.has(name) && !owns(name));
      if (foreign.length) throw pluginErrors.tableOutsidePrefix(pluginId, pending.map((s) => s.name), foreign, prefix);
      const changes = additiveOnly ? nonAdditiveChanges(before, after) : [];
      if (changes.length) throw pluginErrors.migrationNotAdditive(pluginId, pending.map((s) => s.name), changes);
    });
    return steps.map((s) => s.name);
  } catch (err) {
    if (err instanceof PluginLoadError) throw err;
    throw pluginErrors.migration(pluginId, (err as Error).message);
  }
}

async function withTimeout<T>(work: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([work, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(onTimeout()), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** The manifest's `config` section as the plugin's schema reads it; a plugin without a schema takes none. */
function pluginConfig(manifest: PluginManifest, definition: PluginDefinition): unknown {
  if (!definition.config) {
    const given = Object.keys(manifest.config);
    if (given.length) throw pluginErrors.configInvalid(manifest.id, given[0], 'is not a setting of this plugin (it declares no config schema)');
    return undefined;
  }
  const parsed = definition.config.safeParse(manifest.config);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const keys = issue.code === 'unrecognized_keys' ? ` (${issue.keys.join(', ')})` : '';
  throw pluginErrors.configInvalid(manifest.id, issue.path.join('.') || '(section)', `${issue.message}${keys}`);
}

/** The definition of a plugin whose manifest names no entry module: it only contributes what its manifest declares. */
const MANIFEST_ONLY: PluginDefinition = definePlugin({ deps: {}, init: () => undefined });

/**
 * What a manifest contributes, by extension point: its `contributes`, and each field an extension
 * point claims as its `manifestKey` (`recipe_types`); a field no point claims fails the load.
 */
function declaredContributions(manifest: PluginManifest, offerings: OfferingTable): [string, unknown[]][] {
  const declared = new Map(Object.entries(manifest.contributes));
  for (const key of extraManifestKeys(manifest)) {
    const pointId = offerings.pointByManifestKey(key);
    if (!pointId) throw pluginErrors.manifestFieldUnknown(manifest.id, key);
    declared.set(pointId, [...(declared.get(pointId) ?? []), ...((manifest as Record<string, unknown>)[key] as unknown[])]);
  }
  return [...declared];
}
