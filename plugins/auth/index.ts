import { definePlugin } from '../../kernel/plugin-api.ts';
import { passwordRoutes } from './password-routes.ts';
import { authDeps } from './services.ts';
import { sessionRoutes } from './session-routes.ts';
import { tokenRoutes } from './token-routes.ts';

/** The `auth` router: sign-in, password flows and personal access tokens. */
export default definePlugin({
  deps: authDeps,
  init: (services, ctx) => ({ routes: [...sessionRoutes(services), ...passwordRoutes(services, ctx), ...tokenRoutes(services)] }),
});
