import { definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { pluginRoutes } from './routes.ts';

/** The `plugins` router: what is loaded, why something is not, and reload on demand. */
export default definePlugin({
  deps: { plugins: kernelServices.plugins },
  init: ({ plugins }) => ({ routes: pluginRoutes(plugins) }),
});
