export { DIALECTS, POSTGRES_URL, type DialectName } from './dialects.ts';
export { createScratchDatabase, tempDir } from './scratch-database.ts';
export { startTestKernel, writeManifest, FIXTURE_PLUGINS, REPO_ROOT, type TestKernel, type TestResponse } from './test-kernel.ts';
export { until } from './until.ts';
export { writeOutsideThePlatform } from './outside-writes.ts';
