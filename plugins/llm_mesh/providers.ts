import { OfferedContributions, type Contribution, type Disposable, type PluginEnablementService } from '../../kernel/plugin-api.ts';
import type { LlmProviderContribution } from './public.ts';

interface OfferedProvider {
  id: string;
  pluginId: string;
  provider: LlmProviderContribution;
}

/** The providers contributed to `llm_mesh.providers`, offered where their plugin is enabled. */
export class Providers {
  private readonly offered: OfferedContributions<OfferedProvider>;

  constructor(ownerId: string, enablement: PluginEnablementService) {
    this.offered = new OfferedContributions(ownerId, enablement);
  }

  accept({ value, pluginId }: Contribution<LlmProviderContribution>): Disposable {
    return this.offered.add({ id: value.id, pluginId, provider: value });
  }

  async get(orgId: number, id: string): Promise<LlmProviderContribution | undefined> {
    return (await this.offered.get(orgId, id))?.provider;
  }

  /** The providers offered in the organization (null: all), as the API lists them. */
  async described(orgId: number | null) {
    return (await this.offered.list(orgId)).map(({ id, pluginId, provider }) => ({
      id,
      plugin_id: pluginId,
      description: provider.description,
      default_base_url: provider.default_base_url,
      requires_api_key: provider.requires_api_key,
      embeddings: provider.embed !== undefined,
    }));
  }
}
