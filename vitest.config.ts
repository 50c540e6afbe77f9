import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // What kernel/registry/reload-hooks.mjs does for `npm start`: the SDK specifiers resolve from a
  // plugin in any folder (vitest loads modules through its own resolver, not Node's hooks).
  resolve: {
    alias: {
      'data-platform/plugin-api': fileURLToPath(new URL('./kernel/plugin-api.ts', import.meta.url)),
      'data-platform/testing': fileURLToPath(new URL('./test/harness/index.ts', import.meta.url)),
    },
  },
  test: {
    include: ['test/**/*.test.ts', 'plugins/**/*.test.ts'],
    globalSetup: ['test/harness/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
