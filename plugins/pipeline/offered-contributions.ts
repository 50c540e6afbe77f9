import type { PluginEnablementService } from '../../kernel/plugin-api.ts';

/**
 * The contributions to one of the pipeline's extension points (recipe types, step types), by id,
 * offered in an organization only where the pipeline and the contributing plugin are enabled.
 */
export class OfferedContributions<T extends { id: string; pluginId: string }> {
  private readonly entries = new Map<string, T>();

  constructor(
    /** The pipeline's own id: where the pipeline is off, nothing is offered. */
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
