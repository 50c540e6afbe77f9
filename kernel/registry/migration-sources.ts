import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { MigrationSource } from '../../storage/index.ts';
import { isPluginDefinition } from '../plugin-api.ts';
import { topologicalOrder } from './dependency-order.ts';
import { listManifestFiles, readManifest, type PluginManifest } from './manifest.ts';

/**
 * The migrations of every enabled plugin with a valid manifest, in dependency order, without
 * running any plugin's init: what `npm run migrate` applies or reverts.
 */
export async function pluginMigrationSources(manifestDirs: string[]): Promise<{ sources: MigrationSource[]; problems: string[] }> {
  const byId = new Map<string, { manifest: PluginManifest; file: string }>();
  const problems: string[] = [];
  for (const file of listManifestFiles(manifestDirs)) {
    const read = readManifest(file);
    if (!read.ok) problems.push(read.error);
    else if (read.manifest.enabled && !byId.has(read.manifest.id)) byId.set(read.manifest.id, { manifest: read.manifest, file });
  }
  const sources: MigrationSource[] = [];
  for (const id of topologicalOrder(new Set(byId.keys()), byId).order) {
    const { manifest, file } = byId.get(id)!;
    if (!manifest.entry) continue; // contributes from its manifest only: no migrations
    try {
      const exported = (await import(pathToFileURL(path.resolve(path.dirname(file), manifest.entry)).href)).default;
      if (isPluginDefinition(exported) && exported.migrations) sources.push({ pluginId: id, migrations: exported.migrations });
    } catch (err) {
      problems.push(`${file}: entry could not be imported: ${(err as Error).message}`);
    }
  }
  return { sources, problems };
}
