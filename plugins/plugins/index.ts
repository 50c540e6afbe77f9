import { definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { organizationRoutes } from './organization-routes.ts';
import { pluginRoutes } from './routes.ts';

/** The `plugins` router: what is loaded, why something is not, reload on demand, and which organizations each plugin serves. */
export default definePlugin({
  deps: { plugins: kernelServices.plugins, enablement: kernelServices.pluginEnablement, organizations: kernelServices.organizations },
  init: ({ plugins, enablement, organizations }) => ({ routes: [...pluginRoutes(plugins), ...organizationRoutes(enablement, organizations)] }),
});
