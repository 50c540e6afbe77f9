import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // What kernel/registry/reload-hooks.mjs does for `npm start`: the SDK specifiers resolve from a
  // plugin in any folder (vitest loads modules through its own resolver, not Node's hooks).
  resolve: {
    alias: [
      { find: 'data-platform/plugin-api', replacement: fileURLToPath(new URL('./kernel/plugin-api.ts', import.meta.url)) },
      { find: 'data-platform/testing', replacement: fileURLToPath(new URL('./test/harness/index.ts', import.meta.url)) },
      { find: /^data-platform\/plugins\/([a-z0-9_-]+)$/, replacement: fileURLToPath(new URL('./plugins/$1/public.ts', import.meta.url)) },
    ],
  },
  test: {
    include: ['test/**/*.test.ts', 'plugins/**/*.test.ts'],
    globalSetup: ['test/harness/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two files at a time whatever the core count (vitest's default on two cores is one): much of the
    // suite waits on processes, timers and leases rather than computing, and one at a time took the
    // whole run close to CI's 30 minutes.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
