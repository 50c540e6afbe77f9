import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Contribution, Disposable, ExtensionPoint, PluginRegistryService, PluginStatus } from '../plugin-api.ts';
import { HttpProblem, problems } from '../problem.ts';
import { KERNEL_OWNER, OfferingTable } from './offerings.ts';
import { Generation, findConflict, type RouteCompiler } from './generation.ts';
import type { LoadedPlugin } from './loaded-plugin.ts';
import { listManifestFiles, readManifest, type ManifestRead, type PluginManifest } from './manifest.ts';
import { loadPlugin, type LoaderEnvironment } from './plugin-loader.ts';
import { CodeWatcher } from './code-watcher.ts';
import { PluginLoadError, pluginErrors } from './plugin-errors.ts';
import { topologicalOrder, transitiveDependencies } from './dependency-order.ts';

interface Entry {
  file: string;
  read: ManifestRead;
  state: PluginStatus['state'];
  reason: string | null;
  reasonCode: string | null;
  live: LoadedPlugin | null;
  lastReloadError: string | null;
}

export interface RegistryOptions {
  manifestDirs: string[];
  loader: LoaderEnvironment;
  compile: RouteCompiler;
  drainTimeoutMs: number;
  logger: Logger;
  /** Extension points the kernel offers (owned by `kernel`: any plugin may contribute). */
  kernelPoints?: { point: ExtensionPoint<any>; accept: (contribution: Contribution<any>) => Disposable | void | Promise<Disposable | void> }[];
}

/** A required plugin failed at start-up: the kernel must not serve without it. */
export class RequiredPluginError extends Error {}

const WATCH_DEBOUNCE_MS = 150;

/**
 * Loads so far in this process: each load imports its plugin's modules under a URL of its own. Counted
 * per process, not per registry: two kernels in one process (a test's second instance) must not
 * import one module URL for two different versions of the code.
 */
let loads = 0;

/**
 * Loads, orders, reloads and unloads plugins from their manifests. Every change is a transaction:
 * new plugin versions are built beside the live ones, checked, and swapped in as a new generation;
 * if a reload fails the previous versions keep serving.
 */
export class PluginRegistry implements PluginRegistryService {
  private readonly entries = new Map<string, Entry>();
  private offerings = new OfferingTable();
  private generationCounter = 0;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly retiring = new Set<Promise<void>>();
  private readonly watchers: fs.FSWatcher[] = [];
  private codeWatcher: CodeWatcher | undefined;
  /** Manifest files to apply once their folder is quiet; `force` when their plugin's code changed. */
  private readonly pendingFiles = new Map<string, { timer: NodeJS.Timeout; force: boolean }>();
  current: Generation;

  constructor(private readonly options: RegistryOptions) {
    this.current = new Generation(0, new Map(), options.compile);
    for (const { point, accept } of options.kernelPoints ?? []) this.offerings.providePoint(point, KERNEL_OWNER, accept);
  }

  /** Loads every manifest; a failing plugin is skipped unless it is marked required. */
  async start(): Promise<void> {
    await this.serialize(() => this.reconcile(listManifestFiles(this.options.manifestDirs), true));
    const failedRequired = [...this.entries.values()].filter((e) => e.read.ok && e.read.manifest.required && e.state === 'failed');
    if (failedRequired.length) {
      throw new RequiredPluginError(failedRequired.map((e) => `required plugin failed: ${e.reason}`).join('; '));
    }
  }

  /**
   * Starts watching the manifest folders (added, changed and removed manifests take effect at once)
   * and the code folders of the declared plugins (an edited code file reloads its plugin).
   */
  watch(): void {
    this.codeWatcher = new CodeWatcher((dir, file) => this.codeChanged(dir, file), this.options.logger);
    this.codeWatcher.watch(this.codeDirs());
    for (const dir of this.options.manifestDirs) {
      if (!fs.existsSync(dir)) continue;
      const watcher = fs.watch(dir, (_event, name) => {
        if (!name || !name.toString().endsWith('.json')) return;
        this.scheduleSync(path.resolve(dir, name.toString()));
      });
      this.watchers.push(watcher);
    }
  }

  list(): PluginStatus[] {
    return [...this.entries.values()].map(statusOf).sort((a, b) => a.id.localeCompare(b.id) || a.manifest_file.localeCompare(b.manifest_file));
  }

  get(id: string): PluginStatus | undefined {
    return this.list().find((s) => s.id === id);
  }

  /** The manifest of the plugin with this id: the live version's, else as read (failed or disabled); undefined when none declares it. */
  manifestOf(id: string): PluginManifest | undefined {
    const live = this.current.plugins.get(id);
    if (live) return live.manifest;
    for (const entry of this.entries.values()) if (entry.read.ok && entry.read.manifest.id === id) return entry.read.manifest;
    return undefined;
  }

  contributions(pointId: string, orgId: number | null): Promise<unknown[]> {
    return this.offerings.list(pointId, orgId);
  }

  async reload(id: string): Promise<PluginStatus> {
    const entry = [...this.entries.values()].find((e) => e.read.ok && e.read.manifest.id === id);
    if (!entry) throw problems.notFound(`no plugin with id "${id}"`);
    const failure = await this.serialize(() => this.reconcile([entry.file], false, true));
    const status = this.get(id) ?? statusOf(entry);
    const reason = failure?.message ?? (status.state === 'failed' ? status.reason : null);
    const code = failure?.code ?? status.reason_code ?? undefined;
    if (reason) throw new HttpProblem(422, `reload of plugin "${id}" failed: ${reason}`, { code });
    return status;
  }

  /** Re-reads the given manifest files (added, changed or deleted) and applies the difference. */
  async syncFiles(files: string[], force = false): Promise<void> {
    await this.serialize(() => this.reconcile(files.map((f) => path.resolve(f)), false, force));
  }

  /** Stops watching, waits for retiring versions, then drains and disposes every live plugin. */
  async stop(): Promise<void> {
    this.watchers.splice(0).forEach((w) => w.close());
    this.codeWatcher?.close();
    this.codeWatcher = undefined;
    this.pendingFiles.forEach(({ timer }) => clearTimeout(timer));
    await this.serialize(async () => {
      await Promise.all(this.retiring);
      const live = [...this.current.plugins.values()];
      this.current = new Generation(++this.generationCounter, new Map(), this.options.compile);
      await Promise.all(live.map((p) => p.drainAndDispose(this.options.drainTimeoutMs)));
    });
  }

  /** Applies the manifest file once no change came for WATCH_DEBOUNCE_MS (an editor saves in several writes; a checkout touches many files). */
  private scheduleSync(file: string, force = false) {
    const pending = this.pendingFiles.get(file);
    clearTimeout(pending?.timer);
    const reload = force || pending?.force === true;
    const timer = setTimeout(() => {
      this.pendingFiles.delete(file);
      this.syncFiles([file], reload).catch((err) => this.options.logger.error({ err, file }, 'manifest sync failed'));
    }, WATCH_DEBOUNCE_MS);
    this.pendingFiles.set(file, { timer, force: reload });
  }

  /** A code file changed in `dir`: every plugin whose entry lives there is reloaded, even though its manifest is unchanged. */
  private codeChanged(dir: string, file: string) {
    // A manifest beside its plugin's code is the manifest watcher's.
    if (file.endsWith('.json') && this.options.manifestDirs.some((d) => path.resolve(d) === path.dirname(file))) return;
    for (const entry of this.entries.values()) if (codeDirOf(entry) === dir) this.scheduleSync(entry.file, true);
  }

  /** The folders of the entry modules of the declared, enabled plugins (loaded or failed: a fix to a failed one loads it). */
  private codeDirs(): Set<string> {
    return new Set([...this.entries.values()].map(codeDirOf).filter((dir): dir is string => dir !== undefined));
  }

  private serialize<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Applies changed manifest files (`force`: even when their text is unchanged, as an explicit
   * reload asks). Returns why a reload was abandoned (old versions kept), or null.
   */
  private async reconcile(changedFiles: string[], startup: boolean, force = false): Promise<PluginLoadError | null> {
    const { logger } = this.options;
    const reads = new Map<string, ManifestRead | null>();
    for (const file of changedFiles) {
      const previous = this.entries.get(file);
      const read = fs.existsSync(file) ? readManifest(file) : null;
      // An editor's touch, not a change: unless a rejected edit is pending, then the text was put back and is applied again.
      if (!startup && !force && previous && read && read.source === previous.read.source && !previous.lastReloadError) continue;
      reads.set(file, read);
    }
    if (reads.size === 0) return null;

    // A live plugin whose manifest became unreadable keeps serving: a typo must not take it down.
    for (const [file, read] of reads) {
      const live = this.entries.get(file)?.live;
      if (live && read && !read.ok) {
        this.entries.get(file)!.lastReloadError = read.error;
        logger.error({ plugin: live.id, reason: read.error }, 'manifest change rejected; previous version keeps serving');
        return pluginErrors.manifest(read.error);
      }
    }

    // The manifests as they will be: changed files from disk, the others as they were.
    const desired = new Map<string, ManifestRead>();
    for (const [file, entry] of this.entries) if (!reads.has(file)) desired.set(file, entry.read);
    for (const [file, read] of reads) if (read) desired.set(file, read);

    const byId = new Map<string, { file: string; manifest: PluginManifest }>();
    const duplicates = new Map<string, PluginLoadError>();
    for (const file of [...desired.keys()].sort((a, b) => Number(!this.entries.get(b)?.live) - Number(!this.entries.get(a)?.live) || a.localeCompare(b))) {
      const read = desired.get(file)!;
      if (!read.ok) continue;
      const existing = byId.get(read.manifest.id);
      if (existing) duplicates.set(file, pluginErrors.duplicateId(read.manifest.id, existing.file, file));
      else byId.set(read.manifest.id, { file, manifest: read.manifest });
    }

    const touched = new Set<string>();
    for (const file of reads.keys()) {
      const before = this.entries.get(file)?.read;
      const after = reads.get(file);
      if (before?.ok) touched.add(before.manifest.id);
      if (after?.ok) touched.add(after.manifest.id);
    }
    const affected = startup ? new Set(byId.keys()) : this.withDependents(touched, byId);
    for (const entry of this.entries.values()) {
      if (entry.state === 'failed' && entry.reasonCode === 'KRN_ERR_PLUGIN_DEPENDENCY_MISSING' && entry.read.ok) affected.add(entry.read.manifest.id);
    }
    const retired = new Set([...affected].map((id) => this.liveById(id)).filter((p): p is LoadedPlugin => p !== undefined));
    for (const [file, read] of reads) if (!read && this.entries.get(file)?.live) retired.add(this.entries.get(file)!.live!);
    const retiredIds = new Set([...retired].map((p) => p.id));

    const stagedOfferings = this.offerings.fork(retiredIds);
    const stagedLive = new Map([...this.current.plugins].filter(([id]) => !affected.has(id) && !retiredIds.has(id)));
    const outcomes = new Map<string, { state: PluginStatus['state']; error: PluginLoadError | null; live: LoadedPlugin | null }>();
    const created: LoadedPlugin[] = [];

    const folderOf = (id: string) => this.options.manifestDirs.findIndex((dir) => path.dirname(byId.get(id)!.file) === path.resolve(dir));
    const { order, cycle } = topologicalOrder(affected, byId, folderOf);
    if (cycle.length) for (const id of cycle) outcomes.set(id, { state: 'failed', error: pluginErrors.dependencyCycle(cycle), live: null });

    for (const id of order) {
      const { file, manifest } = byId.get(id)!;
      if (duplicates.has(file)) continue;
      if (!manifest.enabled) {
        outcomes.set(id, { state: 'disabled', error: null, live: null });
        continue;
      }
      try {
        const missing = manifest.depends_on.find((dep) => !stagedLive.has(dep));
        if (missing) throw pluginErrors.dependencyMissing(id, missing);
        const plugin = await loadPlugin(
          { manifest, file, dependencies: transitiveDependencies(id, byId), offerings: stagedOfferings, generation: ++loads, additiveOnly: !startup },
          this.options.loader,
        );
        created.push(plugin);
        const conflict = findConflict(plugin, stagedLive.values());
        if (conflict) {
          await plugin.dispose(); // init ran: withdraw its contributions and run its onDispose
          throw conflict;
        }
        stagedLive.set(id, plugin);
        outcomes.set(id, { state: 'loaded', error: null, live: plugin });
      } catch (err) {
        const error = err instanceof PluginLoadError ? err : pluginErrors.initFailed(id, (err as Error).message);
        const hadLive = this.liveById(id) !== undefined;
        if (!startup && hadLive && error.code !== 'KRN_ERR_PLUGIN_DEPENDENCY_MISSING') {
          await Promise.all(created.map((p) => p.dispose()));
          for (const touchedId of touched) {
            const entry = [...this.entries.values()].find((e) => e.read.ok && e.read.manifest.id === touchedId);
            if (entry) entry.lastReloadError = error.message;
          }
          logger.error({ plugin: id, code: error.code, reason: error.message }, 'reload failed; previous versions keep serving');
          return error;
        }
        outcomes.set(id, { state: 'failed', error, live: null });
        logger.error({ plugin: id, code: error.code, reason: error.message }, 'plugin skipped');
      }
    }

    // Commit: record outcomes, swap the generation, retire the replaced versions once they drain.
    for (const [file, read] of reads) if (!read) this.entries.delete(file);
    for (const [file, read] of desired) {
      const previous = this.entries.get(file);
      const duplicate = duplicates.get(file);
      // A duplicate's id belongs to the other file: that file's outcome is not this one's.
      const outcome = read.ok && !duplicate ? outcomes.get(read.manifest.id) : undefined;
      if (!reads.has(file) && !outcome && !duplicate) continue;
      const error = duplicate ?? outcome?.error ?? (read.ok ? null : pluginErrors.manifest(read.error));
      this.entries.set(file, {
        file,
        read,
        state: outcome?.state ?? 'failed',
        reason: error?.message ?? null,
        reasonCode: error?.code ?? null,
        live: outcome?.live ?? null,
        lastReloadError: outcome?.state === 'loaded' ? null : (previous?.lastReloadError ?? null),
      });
      if (duplicate) logger.error({ file, code: duplicate.code, reason: duplicate.message }, 'plugin skipped');
      if (!read.ok) logger.error({ file, reason: read.error }, 'plugin skipped: invalid manifest');
    }
    this.offerings = stagedOfferings;
    this.current = new Generation(++this.generationCounter, stagedLive, this.options.compile);
    // Only now, with every plugin of the generation loaded, do the new versions take background work.
    for (const outcome of outcomes.values()) outcome.live?.activate();
    this.codeWatcher?.watch(this.codeDirs());
    for (const plugin of retired) this.retire(plugin);
    for (const [id, outcome] of outcomes) if (outcome.state === 'loaded') logger.info({ plugin: id, version: outcome.live!.manifest.version }, 'plugin loaded');
    return null;
  }

  private retire(plugin: LoadedPlugin) {
    const done = plugin.drainAndDispose(this.options.drainTimeoutMs).finally(() => this.retiring.delete(done));
    this.retiring.add(done);
  }

  private liveById(id: string): LoadedPlugin | undefined {
    return this.current.plugins.get(id);
  }

  /** The ids plus every plugin that depends on one of them, directly or not. */
  private withDependents(ids: Set<string>, byId: Map<string, { manifest: PluginManifest }>): Set<string> {
    const result = new Set(ids);
    let grew = true;
    while (grew) {
      grew = false;
      for (const [id, { manifest }] of byId) {
        if (!result.has(id) && manifest.depends_on.some((d) => result.has(d))) {
          result.add(id);
          grew = true;
        }
      }
    }
    return result;
  }
}

function codeDirOf(entry: Entry): string | undefined {
  if (!entry.read.ok || !entry.read.manifest.enabled || !entry.read.manifest.entry) return undefined;
  return path.dirname(path.resolve(path.dirname(entry.file), entry.read.manifest.entry));
}

function statusOf(entry: Entry): PluginStatus {
  const manifest = entry.live?.manifest ?? (entry.read.ok ? entry.read.manifest : null);
  return {
    id: manifest?.id ?? path.basename(entry.file, '.json'),
    version: manifest?.version ?? null,
    kind: manifest?.kind ?? null,
    state: entry.state,
    reason: entry.reason,
    reason_code: entry.reasonCode,
    manifest_file: entry.file,
    prefix: manifest?.router?.prefix ?? null,
    loaded_at: entry.live?.loadedAt ?? null,
    last_reload_error: entry.lastReloadError,
  };
}
