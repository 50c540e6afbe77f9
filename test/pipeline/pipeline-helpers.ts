import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { until, type TestKernel } from '../harness/index.ts';

/** A dataset created and loaded through HTTP: `columns` as `name:type`, `rows` as CSV lines. */
export async function loadDataset(t: TestKernel, projectId: number, name: string, columns: string[], rows: string[], options: { token?: string; pii?: string[] } = {}): Promise<number> {
  const created = await t.request('POST', '/api/datasets', {
    token: options.token,
    body: { name, project_id: projectId, columns: columns.map((c) => ({ name: c.split(':')[0], type: c.split(':')[1], pii: options.pii?.includes(c.split(':')[0]) ?? false })) },
  });
  expect(created.status, created.text).toBe(201);
  if (rows.length) {
    const csv = `${columns.map((c) => c.split(':')[0]).join(',')}\n${rows.join('\n')}\n`;
    const load = await t.request('POST', `/api/datasets/${created.body.id}/data`, { token: options.token, body: csv, headers: { 'content-type': 'text/csv' } });
    expect(load.status, load.text).toBe(200);
  }
  return created.body.id;
}

/** An empty dataset (a recipe's output): its columns come from the recipe's first run. */
export async function emptyDataset(t: TestKernel, projectId: number, name: string, token?: string): Promise<number> {
  const created = await t.request('POST', '/api/datasets', { token, body: { name, project_id: projectId, columns: [] } });
  expect(created.status, created.text).toBe(201);
  return created.body.id;
}

export async function createRecipe(t: TestKernel, body: Record<string, unknown>, token?: string): Promise<number> {
  const res = await t.request('POST', '/api/pipeline/recipes', { token, body });
  expect(res.status, res.text).toBe(201);
  return res.body.id;
}

const FINAL = ['succeeded', 'failed', 'cancelled', 'skipped'];

/** Waits for a run to end and answers it. */
export async function finished(t: TestKernel, runId: number, timeoutMs = 30_000): Promise<Record<string, any>> {
  const run = await until(async () => (await t.request('GET', `/api/pipeline/runs/${runId}`)).body as Record<string, any>, (r) => FINAL.includes(r.status), timeoutMs);
  expect(FINAL, `run ${runId} did not end: ${JSON.stringify(run)}`).toContain(run.status);
  return run;
}

/** Runs a recipe to its end. */
export async function runRecipe(t: TestKernel, recipeId: number, token?: string): Promise<Record<string, any>> {
  const started = await t.request('POST', `/api/pipeline/recipes/${recipeId}/run`, { token });
  expect(started.status, started.text).toBe(202);
  return finished(t, started.body.run.id);
}

/** Every row of a dataset, in order. */
export async function rowsOf(t: TestKernel, datasetId: number): Promise<Record<string, unknown>[]> {
  const res = await t.request('GET', `/api/datasets/${datasetId}/rows?limit=1000`);
  expect(res.status, res.text).toBe(200);
  return res.body.rows;
}

/**
 * A third-party recipe type from a folder outside the repository: copies its input 500 rows at a
 * time, pausing `delay_ms` after each batch and logging every 2,500 rows it handed over.
 */
export function writeSlowCopier(root: string): void {
  fs.writeFileSync(path.join(root, 'package.json'), JSON.stringify({ type: 'module' }));
  fs.writeFileSync(
    path.join(root, 'copier.ts'),
    `import type { RecipeHandlerContext } from 'data-platform/plugins/pipeline';

export async function slowCopy(ctx: RecipeHandlerContext<{ delay_ms: number }>) {
  const [input] = ctx.inputs;
  await ctx.output.columns(input.dataset.columns);
  let batch: Record<string, unknown>[] = [];
  let written = 0;
  for await (const row of input.rows()) {
    batch.push(row);
    if (batch.length < 500) continue;
    await ctx.output.write(batch);
    written += batch.length;
    batch = [];
    if (written % 2500 === 0) ctx.log.info('wrote ' + written + ' rows');
    await new Promise((resolve) => setTimeout(resolve, ctx.params.delay_ms));
  }
  if (batch.length) await ctx.output.write(batch);
  ctx.log.info('copied ' + (written + batch.length) + ' rows');
}
`,
  );
  fs.writeFileSync(
    path.join(root, 'copier.json'),
    JSON.stringify({
      id: 'copier',
      version: '1.0.0',
      kind: 'recipe-type',
      depends_on: ['pipeline'],
      recipe_types: [
        { id: 'slow_copy', handler: 'copier:slowCopy', description: 'copies rows slowly', params: { type: 'object', properties: { delay_ms: { type: 'integer', minimum: 0 } }, required: ['delay_ms'], additionalProperties: false } },
      ],
    }),
  );
}
