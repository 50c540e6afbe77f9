import { pageCursor, problems, type Disposable, type PluginEnablementService, type Principal } from '../../kernel/plugin-api.ts';
import type { PublishedAsset, PublishedAssetSource } from './public.ts';
import type { ServiceStore } from './service-store.ts';

export interface AssetPageQuery {
  asset_type?: string;
  project_id?: number;
  limit: number;
  cursor?: string;
}

/** An asset's place in the listing order: where the next page starts (after it). */
type AssetPosition = Pick<PublishedAsset, 'published_at' | 'asset_type' | 'id'>;

/** Newest published first; assets published at the same instant by type, then newest id first. */
const listingOrder = (a: AssetPosition, b: AssetPosition) => Date.parse(b.published_at) - Date.parse(a.published_at) || a.asset_type.localeCompare(b.asset_type) || b.id - a.id;

const positionCursor = {
  encode: ({ published_at, asset_type, id }: AssetPosition) => pageCursor.encode({ published_at, asset_type, id }),
  decode: (cursor: string) =>
    pageCursor.decode<AssetPosition>(cursor, (v) => typeof v.published_at === 'string' && !Number.isNaN(Date.parse(v.published_at)) && typeof v.asset_type === 'string' && Number.isSafeInteger(v.id)),
};

/**
 * The registry of published assets (`publishing.assets`): one source per asset type, each offered
 * in an organization only where the plugin contributing it is enabled. The sources answer their
 * assets whole; a page is cut from them here (an organization publishes hundreds, not millions).
 */
export class PublishedAssets {
  private readonly sources = new Map<string, { pluginId: string; source: PublishedAssetSource }>();

  constructor(private readonly enablement: PluginEnablementService) {}

  /** Adds a source (a contribution, or the publishing plugin's own); answers what withdraws it. */
  add(pluginId: string, source: PublishedAssetSource): Disposable {
    const entry = { pluginId, source };
    this.sources.set(source.asset_type, entry);
    // A reloading contributor's new version has replaced this entry before the old one withdraws.
    return () => {
      if (this.sources.get(source.asset_type) === entry) this.sources.delete(source.asset_type);
    };
  }

  /** The sources offered in the organization, by asset type. */
  async offered(orgId: number): Promise<PublishedAssetSource[]> {
    const all = [...this.sources.values()].sort((a, b) => a.source.asset_type.localeCompare(b.source.asset_type));
    const enabled = await Promise.all(all.map(({ pluginId }) => this.enablement.isEnabled(pluginId, orgId)));
    return all.filter((_, i) => enabled[i]).map(({ source }) => source);
  }

  /** A page of the organization's published assets, newest published first; an asset type not offered there is a 400 naming `query.asset_type`. */
  async page(orgId: number, principal: Principal, query: AssetPageQuery): Promise<{ items: PublishedAsset[]; next_cursor: string | null }> {
    const offered = await this.offered(orgId);
    const types = offered.map((s) => s.asset_type);
    if (query.asset_type !== undefined && !types.includes(query.asset_type)) {
      const message = `unknown asset type ${JSON.stringify(query.asset_type)}; known: ${types.join(', ') || 'none'}`;
      throw problems.badRequest(`query.asset_type: ${message}`, [{ path: 'query.asset_type', message }]);
    }
    const after = query.cursor === undefined ? null : positionCursor.decode(query.cursor);
    const chosen = offered.filter((s) => query.asset_type === undefined || s.asset_type === query.asset_type);
    const assets = (await Promise.all(chosen.map((s) => s.list(orgId, principal))))
      .flat()
      .filter((a) => query.project_id === undefined || a.project_id === query.project_id)
      .sort(listingOrder);
    const start = after === null ? 0 : assets.findIndex((a) => listingOrder(a, after) > 0);
    const items = start < 0 ? [] : assets.slice(start, start + query.limit);
    const more = start >= 0 && start + query.limit < assets.length;
    return { items, next_cursor: more ? positionCursor.encode(items[items.length - 1]) : null };
  }
}

/** The API Services source: the organization's published services, each reached at /api/service/<key>. */
export function apiServiceAssets(services: ServiceStore): PublishedAssetSource {
  return {
    asset_type: 'api_service',
    list: async (orgId) =>
      (await services.list(orgId))
        .filter((s) => s.status === 'published')
        .map((s) => ({ asset_type: 'api_service', id: s.id, name: s.name, project_id: s.project_id, status: s.status, published_by: s.publisher?.userId ?? null, published_at: s.published_at!, url: `/api/service/${s.key}` })),
  };
}
