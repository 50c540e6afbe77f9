import { definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { organizationBranding } from '../branding/public.ts';
import { datasetCatalog } from '../datasets/public.ts';
import { projectCatalog, projectDeleteGuards } from '../projects/public.ts';
import { publishedAssets } from '../publishing/public.ts';
import { governedSql } from '../sql/public.ts';
import { CardService } from './card-data.ts';
import { CardTypes } from './card-types.ts';
import { DashboardStore } from './dashboard-store.ts';
import { LinkStore } from './link-store.ts';
import { dashboardsMigrations } from './migrations.ts';
import { cardTypes } from './public.ts';
import { publishRoutes } from './publish-routes.ts';
import { dashboardRoutes } from './routes.ts';

/**
 * The `dashboards` router: dashboards of cards whose types plugins contribute, computed through
 * governed SQL, and their published pages (share links under /p/dashboards).
 */
export default definePlugin({
  deps: {
    storage: kernelServices.storage,
    enablement: kernelServices.pluginEnablement,
    tokens: kernelServices.tokens,
    events: kernelServices.events,
    delegation: kernelServices.delegation,
    audit: kernelServices.audit,
    logger: kernelServices.logger,
  },
  migrations: dashboardsMigrations,
  init: ({ storage, enablement, tokens, events, delegation, audit, logger }, ctx) => {
    const store = new DashboardStore(storage);
    const links = new LinkStore(storage, (text) => tokens.hmac(text));
    const types = new CardTypes(ctx.pluginId, enablement);
    ctx.provideExtensionPoint(cardTypes, (contribution) => types.accept(contribution), { list: (orgId) => types.described(orgId) });
    ctx.contribute(projectDeleteGuards, async (orgId, projectId) => {
      const count = await store.countInProject(orgId, projectId);
      return count ? `the project holds ${count} dashboard${count === 1 ? '' : 's'}` : null;
    });
    // A dashboard with a live share link is a published asset, reached (by its members) at its links' list.
    ctx.contribute(publishedAssets, {
      asset_type: 'dashboard',
      list: async (orgId) =>
        (await links.published(orgId)).map((d) => ({ asset_type: 'dashboard', id: d.id, name: d.name, project_id: d.project_id, status: 'published', published_by: d.published_by, published_at: d.published_at, url: `/api/dashboards/${d.id}/publish` })),
    });
    const cards = new CardService({ storage, catalog: ctx.useService(datasetCatalog), governed: ctx.useService(governedSql), types });
    return {
      routes: [
        ...dashboardRoutes({ store, cards, types, projects: ctx.useService(projectCatalog) }),
        ...publishRoutes({ storage, store, links, cards, events, delegation, enablement, audit, branding: ctx.useService(organizationBranding), pluginId: ctx.pluginId, log: logger }),
      ],
    };
  },
});
