import type { PluginEnablementService } from '../plugin-api.ts';

/**
 * The contributions to one plugin's extension point (recipe types, step types, card types), by id,
 * offered in an organization only where the owner and the contributing plugin are enabled: the
 * bookkeeping every owner of such a point needs, so each does not write its own.
 */
export class OfferedContributions<T extends { id: string; pluginId: string }> {
  private readonly entries = new Map<string, T>();

  constructor(
    /** The owner's plugin id: where the owner is off, nothing is offered. */
    private readonly ownerId: string,
    private readonly enablement: PluginEnablementService,
  ) {}

  /** Adds a resolved contribution; answers what withdraws it. */
  add(entry: T): () => void {
    this.entries.set(entry.id, entry);
    // A reloading contributor's new version has replaced this entry before the old one withdraws.
    return () => {
      if (this.entries.get(entry.id) === entry) this.entries.delete(entry.id);
    };
  }

  /** Those offered in the organization (null: every one), by id. */
  async list(orgId: number | null): Promise<T[]> {
    const all = [...this.entries.values()].sort((a, b) => a.id.localeCompare(b.id));
    if (orgId === null) return all;
    if (!(await this.enablement.isEnabled(this.ownerId, orgId))) return [];
    const offered = await Promise.all(all.map((entry) => this.enablement.isEnabled(entry.pluginId, orgId)));
    return all.filter((_, i) => offered[i]);
  }

  /** The entry if it is offered in the organization. */
  async get(orgId: number, id: string): Promise<T | undefined> {
    const entry = this.entries.get(id);
    if (!entry || !(await this.enablement.isEnabled(this.ownerId, orgId))) return undefined;
    return (await this.enablement.isEnabled(entry.pluginId, orgId)) ? entry : undefined;
  }
}
