import { definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { datasetCatalog } from '../datasets/public.ts';
import { projectCatalog, projectDeleteGuards } from '../projects/public.ts';
import { governedSql } from '../sql/public.ts';
import { CardService } from './card-data.ts';
import { CardTypes } from './card-types.ts';
import { DashboardStore } from './dashboard-store.ts';
import { dashboardsMigrations } from './migrations.ts';
import { cardTypes } from './public.ts';
import { dashboardRoutes } from './routes.ts';

/** The `dashboards` router: dashboards of cards whose types plugins contribute, computed through governed SQL. */
export default definePlugin({
  deps: { storage: kernelServices.storage, enablement: kernelServices.pluginEnablement },
  migrations: dashboardsMigrations,
  init: ({ storage, enablement }, ctx) => {
    const store = new DashboardStore(storage);
    const types = new CardTypes(ctx.pluginId, enablement);
    ctx.provideExtensionPoint(cardTypes, (contribution) => types.accept(contribution), { list: (orgId) => types.described(orgId) });
    ctx.contribute(projectDeleteGuards, async (orgId, projectId) => {
      const count = await store.countInProject(orgId, projectId);
      return count ? `the project holds ${count} dashboard${count === 1 ? '' : 's'}` : null;
    });
    const cards = new CardService({ storage, catalog: ctx.useService(datasetCatalog), governed: ctx.useService(governedSql), types });
    return { routes: dashboardRoutes({ store, cards, types, projects: ctx.useService(projectCatalog) }) };
  },
});
