import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COPY_TYPE, writeCopyRecipeType } from '../bench/pipeline.ts';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, type TestKernel } from '../harness/index.ts';
import { createRecipe, emptyDataset, loadDataset, rowsOf, runRecipe } from './pipeline-helpers.ts';

/** A plugin recipe handler's inputs are read as the user running the recipe may read them. */
describe.each(DIALECTS)('plugin recipe handler inputs (%s)', (dialect) => {
  let t: TestKernel;
  const folder = tempDir('dp-copier-');
  let project: number;
  let sales: number;
  let frTeam: number;
  let fr: { id: number; token: string };

  beforeAll(async () => {
    // The bench's recipe type: a handler copying its input, every column, row by row.
    writeCopyRecipeType(folder.dir);
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), folder.dir] });
    project = (await t.request('POST', '/api/projects', { body: { key: 'COPY', name: 'Copies' } })).body.id;
    // 25 rows, countries in turn, one email (PII) each.
    const countries = ['FR', 'DE', 'IT', 'FR', 'ES'];
    sales = await loadDataset(t, project, 'sales', ['id:integer', 'country:string', 'amount:number', 'email:string'], Array.from({ length: 25 }, (_, i) => `${i + 1},${countries[i % 5]},${(i + 1) * 1.5},p${i + 1}@example.test`), { pii: ['email'] });
    frTeam = (await t.request('POST', '/api/groups', { body: { name: 'fr-team', capabilities: [] } })).body.id;
    fr = await t.userToken('editor', 'copier-fr');
    expect((await t.request('POST', `/api/groups/${frTeam}/members`, { body: { user_id: fr.id } })).status).toBe(201);
    const policy = await t.request('POST', `/api/datasets/${sales}/row-policies`, { body: { group_id: frTeam, filters: ['country:eq:FR'] } });
    expect(policy.status, policy.text).toBe(201);
  });
  afterAll(async () => {
    await t?.stop();
    folder.remove();
  });

  const frIds = Array.from({ length: 25 }, (_, i) => i + 1).filter((id) => [1, 4].includes(id % 5));

  it('a user limited by a row policy: the handler sees only the rows the policy lets through; a PII input is refused without datasets.pii.read', async () => {
    // The same rows as the rows API shows this user.
    const seen = await t.request('GET', `/api/datasets/${sales}/rows?limit=100&columns=id,country,amount`, { token: fr.token });
    expect(seen.body.rows.map((r: { id: number }) => r.id)).toEqual(frIds);

    // An editor has no datasets.pii.read: a handler's run over the dataset with its PII column is refused, its output left as it was.
    const refusedOut = await emptyDataset(t, project, 'fr_copy_refused', fr.token);
    const refused = await runRecipe(t, await createRecipe(t, { project_id: project, name: 'copy with pii', type: COPY_TYPE, inputs: [sales], outputs: [refusedOut], params: {} }, fr.token), fr.token);
    expect(refused.status, JSON.stringify(refused)).toBe('failed');
    expect(refused.error.detail).toMatch(/datasets\.pii\.read/);
    expect((await t.request('GET', `/api/datasets/${refusedOut}`)).body).toMatchObject({ version: 1, row_count: 0 });

    // The same rows without a PII column, under the same policy.
    const plain = await loadDataset(t, project, 'plain_sales', ['id:integer', 'country:string', 'amount:number'], Array.from({ length: 25 }, (_, i) => `${i + 1},${['FR', 'DE', 'IT', 'FR', 'ES'][i % 5]},${(i + 1) * 1.5}`));
    expect((await t.request('POST', `/api/datasets/${plain}/row-policies`, { body: { group_id: frTeam, filters: ['country:eq:FR'] } })).status).toBe(201);
    const out = await emptyDataset(t, project, 'fr_copy', fr.token);
    const recipe = await createRecipe(t, { project_id: project, name: 'copy as fr', type: COPY_TYPE, inputs: [plain], outputs: [out], params: {} }, fr.token);
    const run = await runRecipe(t, recipe, fr.token);
    expect(run, JSON.stringify(run)).toMatchObject({ status: 'succeeded', rows_written: frIds.length });
    expect(await rowsOf(t, out)).toEqual(frIds.map((id) => ({ id, country: 'FR', amount: id * 1.5 })));
  });

  it('a user with datasets.pii.read sees the PII values, every row without a policy limiting them', async () => {
    const out = await emptyDataset(t, project, 'admin_copy');
    const recipe = await createRecipe(t, { project_id: project, name: 'copy as admin', type: COPY_TYPE, inputs: [sales], outputs: [out], params: {} });
    const run = await runRecipe(t, recipe);
    expect(run, JSON.stringify(run)).toMatchObject({ status: 'succeeded', rows_written: 25 });
    const rows = await rowsOf(t, out);
    expect(rows.map((r) => r.id)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    expect(rows[0]).toEqual({ id: 1, country: 'FR', amount: 1.5, email: 'p1@example.test' });
    // What the handler computed from which column is unknown: with a PII input, every output column is PII.
    const columns = (await t.request('GET', `/api/datasets/${out}`)).body.columns as { name: string; pii: boolean }[];
    expect(columns.map((c) => `${c.name}:${c.pii}`)).toEqual(['id:true', 'country:true', 'amount:true', 'email:true']);
  });
});
