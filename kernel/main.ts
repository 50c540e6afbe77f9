import 'dotenv/config';
import { register } from 'node:module';
import { fileURLToPath } from 'node:url';
import { loadSettings, SettingsError } from './config.ts';
import { Kernel } from './kernel.ts';
import { RequiredPluginError } from './registry/registry.ts';

/** Lets a plugin reload re-import the plugin's own modules, not only its entry, and plugins anywhere import the SDK (see the hook file). */
function registerReloadHooks() {
  const sharedRoots = ['../', '../../storage/'].map((dir) => fileURLToPath(new URL(dir, new URL('./registry/', import.meta.url))));
  const platformPackage = new URL('../package.json', import.meta.url).href;
  register('./registry/reload-hooks.mjs', import.meta.url, { data: { sharedRoots, platformPackage } });
}

/** `npm start`: validate settings, start the platform, stop gracefully on SIGTERM / SIGINT. */
async function main() {
  registerReloadHooks();
  let settings;
  try {
    settings = loadSettings(process.env);
  } catch (err) {
    if (err instanceof SettingsError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const kernel = new Kernel({ settings });
  try {
    await kernel.start();
  } catch (err) {
    const reason = err instanceof RequiredPluginError ? err.message : (err as Error).message;
    kernel.logger.fatal({ reason }, 'start-up failed');
    process.stderr.write(`start-up failed: ${reason}\n`);
    await kernel.stop().catch(() => undefined);
    process.exit(1);
  }
  process.stdout.write(`Data platform listening on ${kernel.url} — API docs at ${kernel.url}/docs (Redoc at ${kernel.url}/redoc)\n`);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    kernel.logger.info({ signal }, 'draining and shutting down');
    await kernel.stop();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

await main();
