/**
 * dbt import time on each adapter, of the largest manifest of test/fixtures/dbt (jaffle_shop, v12),
 * into a fresh project each round: the first import (its datasets; the models wait for their
 * seeds' columns), the import after the seeds are loaded (the models' recipes, each planned by the
 * governed-SQL check), and an import with nothing changed (the idempotent case).
 */
import fs from 'node:fs';
import path from 'node:path';
import { loadSettings } from '../../kernel/config.ts';
import { Kernel } from '../../kernel/kernel.ts';
import { createLogger } from '../../kernel/logger.ts';
import { REPO_ROOT } from '../harness/test-kernel.ts';
import { createScratchDatabase } from '../harness/scratch-database.ts';

const ROUNDS = Number(process.env.BENCH_DBT_ROUNDS ?? 5);
const FIXTURES = path.join(REPO_ROOT, 'test/fixtures/dbt');

/** The fixture whose manifest is the largest, with its seeds. */
function largestFixture(): { name: string; manifest: string; bytes: number; seeds: Record<string, string> } {
  const [name] = fs
    .readdirSync(FIXTURES)
    .filter((dir) => fs.existsSync(path.join(FIXTURES, dir, 'manifest.json')))
    .map((dir) => [dir, fs.statSync(path.join(FIXTURES, dir, 'manifest.json')).size] as const)
    .sort((a, b) => b[1] - a[1])[0];
  const dir = path.join(FIXTURES, name);
  const manifest = fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8');
  const seeds = Object.fromEntries(fs.readdirSync(dir).filter((f) => f.endsWith('.csv')).map((f) => [f.replace(/\.csv$/, ''), fs.readFileSync(path.join(dir, f), 'utf8')]));
  return { name, manifest, bytes: Buffer.byteLength(manifest), seeds };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const round = (ms: number) => Math.round(ms * 10) / 10;

export interface DbtFigures {
  dialect: string;
  fixture: string;
  manifest_kb: number;
  rounds: number;
  first_import_ms: number;
  import_with_recipes_ms: number;
  unchanged_import_ms: number;
  recipes: number;
}

export async function benchDbt(dialect: 'sqlite' | 'postgres', work: string, manifests: string): Promise<DbtFigures> {
  const dir = path.join(work, `dbt-${dialect}`);
  const database = await createScratchDatabase(dialect, dir);
  const settings = loadSettings({ PORT: '0', DATA_DIR: dir, DATABASE_URL: database.url, MANIFESTS_DIR: manifests, PLUGIN_WATCH: 'false', ADMIN_PASSWORD: 'bench-password', API_RATE_LIMIT_PER_SEC: '0' });
  const kernel = new Kernel({ settings, logger: createLogger('silent'), print: () => undefined });
  await kernel.start();
  const fixture = largestFixture();
  try {
    const admin = await kernel.storage.db.selectFrom('users').select(['id', 'role']).orderBy('id').executeTakeFirstOrThrow();
    const token = await kernel.issueToken(admin);
    const call = async (method: string, route: string, body?: string, type = 'application/json') => {
      const res = await fetch(`${kernel.url}${route}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': type }, body });
      if (res.status >= 300) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
      return res.json() as Promise<Record<string, any>>;
    };
    const timedImport = async (projectId: number) => {
      const began = performance.now();
      const done = await call('POST', '/api/dbt/imports', `{"project_id":${projectId},"manifest":${fixture.manifest}}`);
      return { ms: performance.now() - began, summary: done.summary };
    };
    const first: number[] = [];
    const withRecipes: number[] = [];
    const unchanged: number[] = [];
    let recipes = 0;
    for (let i = 0; i < ROUNDS; i++) {
      const project = await call('POST', '/api/projects', JSON.stringify({ key: `DBT${i}`, name: `dbt bench ${i}` }));
      first.push((await timedImport(project.id)).ms);
      const datasets = (await call('GET', `/api/datasets?project_id=${project.id}&limit=500`)).items as { id: number; name: string }[];
      for (const [seed, csv] of Object.entries(fixture.seeds)) {
        const dataset = datasets.find((d) => d.name === seed || d.name.startsWith(`${seed}_`))!;
        await call('POST', `/api/datasets/${dataset.id}/data?mode=replace`, csv, 'text/csv');
      }
      const second = await timedImport(project.id);
      withRecipes.push(second.ms);
      recipes = second.summary.recipes_created;
      unchanged.push((await timedImport(project.id)).ms);
    }
    return { dialect, fixture: fixture.name, manifest_kb: Math.round(fixture.bytes / 1024), rounds: ROUNDS, first_import_ms: round(median(first)), import_with_recipes_ms: round(median(withRecipes)), unchanged_import_ms: round(median(unchanged)), recipes };
  } finally {
    await kernel.stop();
    await database.drop();
  }
}

export const dbtRows = (figures: DbtFigures) => ({
  [`dbt import (${figures.dialect}), ${figures.fixture} ${figures.manifest_kb} KB: first / with ${figures.recipes} recipes / unchanged (median ms)`]: {
    value: `${figures.first_import_ms} / ${figures.import_with_recipes_ms} / ${figures.unchanged_import_ms}`,
  },
});
