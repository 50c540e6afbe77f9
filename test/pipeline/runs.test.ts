import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { createRecipe, emptyDataset, finished, loadDataset, rowsOf } from './pipeline-helpers.ts';

describe.each(DIALECTS)('recipe checks, jobs, builds, runs and flows (%s)', (dialect) => {
  let t: TestKernel;
  let project: number;
  let other: number;
  /** raw → (clean) → clean → (totals) → totals; raw → (sample) → sampled */
  let raw: number;
  let clean: number;
  let totals: number;
  let sampled: number;
  const recipes: Record<string, number> = {};

  const runJob = async (targets: number[], mode: string) => {
    const job = await t.request('POST', '/api/pipeline/jobs', { body: { project_id: project, name: `job ${mode} ${Date.now()}`, targets, mode } });
    expect(job.status, job.text).toBe(201);
    const started = await t.request('POST', `/api/pipeline/jobs/${job.body.id}/run`);
    expect(started.status, started.text).toBe(202);
    expect(started.body.run).toMatchObject({ kind: 'job', job_id: job.body.id, targets, mode });
    const run = await finished(t, started.body.run.id);
    const children = (await t.request('GET', `/api/pipeline/runs?parent_run_id=${run.id}`)).body.items as Record<string, any>[];
    const byRecipe = Object.fromEntries(Object.entries(recipes).map(([name, id]) => [name, children.find((c) => c.recipe_id === id)?.status ?? null]));
    return { run, children, byRecipe };
  };

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    project = (await t.request('POST', '/api/projects', { body: { key: 'FLOW', name: 'Flow' } })).body.id;
    other = (await t.request('POST', '/api/projects', { body: { key: 'OTHER', name: 'Other' } })).body.id;
    raw = await loadDataset(t, other, 'raw', ['id:integer', 'kind:string', 'amount:number'], ['1,a,10', '2,b,20', '3,a,30', '4,,40']);
    clean = await emptyDataset(t, project, 'clean');
    totals = await emptyDataset(t, project, 'totals');
    sampled = await emptyDataset(t, project, 'sampled');
    recipes.clean = await createRecipe(t, { project_id: project, name: 'clean', type: 'filter', inputs: [raw], outputs: [clean], params: { conditions: ['kind:is_null:false'] } });
    recipes.totals = await createRecipe(t, { project_id: project, name: 'totals', type: 'group', inputs: [clean], outputs: [totals], params: { keys: ['kind'], aggregations: [{ column: 'amount', fn: 'sum', as: 'total' }] } });
    recipes.sample = await createRecipe(t, { project_id: project, name: 'sample', type: 'sample', inputs: [raw], outputs: [sampled], params: { method: 'head', rows: 2 } });
  });
  afterAll(async () => t?.stop());

  describe('checks at create and update, each a problem naming the field', () => {
    const body = (more: Record<string, unknown>) => ({ project_id: project, name: `r${Math.random()}`, type: 'filter', inputs: [raw], outputs: [], params: { conditions: ['id:gt:1'] }, ...more });
    const post = (more: Record<string, unknown>) => t.request('POST', '/api/pipeline/recipes', { body: body(more) });

    it('refuses datasets that do not exist here, an output of another project, and a project that does not exist', async () => {
      const out = await emptyDataset(t, project, 'check_out');
      let res = await post({ inputs: [999_999], outputs: [out] });
      expect([res.status, res.body.errors]).toEqual([422, [{ path: 'body.inputs.0', message: 'no such dataset' }]]);
      res = await post({ outputs: [out, 999_998] });
      expect([res.status, res.body.errors]).toEqual([422, [{ path: 'body.outputs.1', message: 'no such dataset' }]]);
      res = await post({ outputs: [raw] });
      expect([res.status, res.body.errors]).toEqual([422, [{ path: 'body.outputs.0', message: 'in another project' }]]);
      res = await post({ project_id: 999_997, outputs: [out] });
      expect([res.status, res.body.errors]).toEqual([422, [{ path: 'body.project_id', message: 'no such project' }]]);
      res = await post({ outputs: [] });
      expect(res.status).toBe(400);
      expect(res.body.errors[0].path).toBe('body.outputs');
    });

    it('refuses an unknown type (422), params that fail its schema (400 at body.params.…) or name unknown columns', async () => {
      const out = await emptyDataset(t, project, 'check_out2');
      let res = await post({ type: 'teleport', outputs: [out] });
      expect([res.status, res.body.errors]).toEqual([422, [{ path: 'body.type', message: 'unknown recipe type teleport' }]]);
      res = await post({ outputs: [out], params: { conditions: [], combine: 'xor' } });
      expect(res.status).toBe(400);
      expect(res.body.errors.map((e: { path: string }) => e.path).sort()).toEqual(['body.params.combine', 'body.params.conditions']);
      res = await post({ outputs: [out], params: { conditions: ['nope:eq:1'] } });
      expect([res.status, res.body.errors]).toEqual([400, [{ path: 'body.params.conditions.0', message: 'unknown column nope' }]]);
      res = await post({ type: 'join', outputs: [out], params: { on: [{ left: 'id', right: 'id' }] } });
      expect([res.status, res.body.errors]).toEqual([422, [{ path: 'body.inputs', message: 'takes exactly 2' }]]);
    });

    it('refuses a second producer of a dataset and a cycle (409 naming it)', async () => {
      let res = await post({ outputs: [clean] });
      expect(res.status, res.text).toBe(409);
      expect(res.body.detail).toMatch(new RegExp(`dataset ${clean} is already the output of recipe ${recipes.clean}`));
      const loop = await emptyDataset(t, project, 'loop');
      // clean → totals → loop; then clean reading loop would close the loop. Neither loop nor totals
      // has been written yet: their columns are those their producers' plans would write.
      const toLoop = await createRecipe(t, { project_id: project, name: 'to loop', type: 'distinct', inputs: [totals], outputs: [loop], params: {} });
      res = await t.request('PATCH', `/api/pipeline/recipes/${recipes.clean}`, { body: { inputs: [loop] } });
      expect(res.status, res.text).toBe(409);
      expect(res.body.detail).toBe(`the recipe would close a cycle through datasets ${clean} → ${totals} → ${loop} → ${clean} (body.inputs)`);
      res = await post({ inputs: [clean], outputs: [clean], params: { conditions: ['kind:eq:a'] } });
      expect(res.status, res.text).toBe(409);
      expect((await t.request('DELETE', `/api/pipeline/recipes/${toLoop}`)).status).toBe(204);
    });

    it('changes a recipe with the same checks, and keeps it as it was when refused', async () => {
      const before = (await t.request('GET', `/api/pipeline/recipes/${recipes.clean}`)).body;
      const bad = await t.request('PATCH', `/api/pipeline/recipes/${recipes.clean}`, { body: { params: { conditions: ['ghost:eq:1'] } } });
      expect(bad.status).toBe(400);
      expect((await t.request('GET', `/api/pipeline/recipes/${recipes.clean}`)).body).toEqual(before);
      const renamed = await t.request('PATCH', `/api/pipeline/recipes/${recipes.clean}`, { body: { name: 'clean rows' } });
      expect(renamed.status, renamed.text).toBe(200);
      expect(renamed.body).toMatchObject({ id: recipes.clean, name: 'clean rows', type: 'filter', inputs: [raw], outputs: [clean] });
      const listed = (await t.request('GET', `/api/pipeline/recipes?project_id=${project}`)).body.items;
      expect(listed.map((r: { id: number }) => r.id)).toEqual([recipes.clean, recipes.totals, recipes.sample]);
    });
  });

  describe('jobs and builds', () => {
    it('build runs only the recipes producing the targets; build_required also what is out of date upstream; force everything', async () => {
      // Nothing ran yet: build runs the producer of totals only, which reads clean (still empty: no columns) and fails.
      const first = await runJob([totals, sampled], 'build');
      expect(first.byRecipe).toEqual({ clean: null, totals: 'failed', sample: 'succeeded' });
      expect(first.run).toMatchObject({ status: 'failed', error: { title: 'Build failed' } });

      const required = await runJob([totals], 'build_required');
      expect(required.byRecipe).toEqual({ clean: 'succeeded', totals: 'succeeded', sample: null });
      expect(required.run).toMatchObject({ status: 'succeeded', rows_written: 5 });
      expect((await rowsOf(t, totals)).sort((a, b) => String(a.kind).localeCompare(String(b.kind)))).toEqual([
        { kind: 'a', total: 40 },
        { kind: 'b', total: 20 },
      ]);

      // Nothing changed upstream: clean is up to date (skipped, no error); totals, a target's producer, runs.
      const again = await runJob([totals], 'build_required');
      expect(again.byRecipe).toEqual({ clean: 'skipped', totals: 'succeeded', sample: null });
      expect(again.children.find((c) => c.recipe_id === recipes.clean)!.error).toBeNull();
      expect(again.run.status).toBe('succeeded');

      // raw changes: clean is out of date again.
      const append = await t.request('POST', `/api/datasets/${raw}/rows`, { body: [{ id: 5, kind: 'b', amount: 5 }] });
      expect(append.status, append.text).toBe(200);
      const changed = await runJob([totals], 'build_required');
      expect(changed.byRecipe).toEqual({ clean: 'succeeded', totals: 'succeeded', sample: null });
      expect((await rowsOf(t, totals)).find((r) => r.kind === 'b')).toEqual({ kind: 'b', total: 25 });

      const forced = await runJob([totals, sampled], 'force');
      expect(forced.byRecipe).toEqual({ clean: 'succeeded', totals: 'succeeded', sample: 'succeeded' });
      for (const child of forced.children) expect(child).toMatchObject({ kind: 'recipe', trigger: 'dependency', parent_run_id: forced.run.id });
    });

    it('skips the recipes downstream of a failed one; an independent branch still runs', async () => {
      const branchRaw = await loadDataset(t, project, 'branch_raw', ['n:integer'], ['1', '2']);
      const mid = await emptyDataset(t, project, 'branch_mid');
      const end = await emptyDataset(t, project, 'branch_end');
      const side = await emptyDataset(t, project, 'branch_side');
      const breaks = await createRecipe(t, { project_id: project, name: 'breaks', type: 'sql', inputs: [branchRaw], outputs: [mid], params: { query: 'select n from branch_raw' } });
      const after = await createRecipe(t, { project_id: project, name: 'after', type: 'distinct', inputs: [mid], outputs: [end], params: {} });
      const beside = await createRecipe(t, { project_id: project, name: 'beside', type: 'distinct', inputs: [branchRaw], outputs: [side], params: {} });
      // The input loses the column the sql recipe reads: its run fails.
      const replaced = await t.request('POST', `/api/datasets/${branchRaw}/data?mode=replace`, { body: 'm\n1\n', headers: { 'content-type': 'text/csv' } });
      expect(replaced.status, replaced.text).toBe(200);
      const job = await t.request('POST', '/api/pipeline/jobs', { body: { project_id: project, name: 'branches', targets: [end, side], mode: 'force' } });
      const run = await finished(t, (await t.request('POST', `/api/pipeline/jobs/${job.body.id}/run`)).body.run.id);
      const children = (await t.request('GET', `/api/pipeline/runs?parent_run_id=${run.id}`)).body.items as Record<string, any>[];
      const of = (id: number) => children.find((c) => c.recipe_id === id);
      expect(of(breaks)!).toMatchObject({ status: 'failed' });
      expect(of(after)).toMatchObject({ status: 'skipped', error: { title: 'Skipped' } });
      expect(of(beside)).toMatchObject({ status: 'succeeded' });
      expect(run).toMatchObject({ status: 'failed', error: { detail: '1 of 3 recipe runs failed' } });
      const logs = (await t.request('GET', `/api/pipeline/runs/${of(breaks)!.id}/logs`)).body.items;
      expect(logs.at(-1)).toMatchObject({ level: 'error', message: expect.stringMatching(/^failed: /) });
    });

    it('checks jobs like recipes: targets and project exist here, a name once per project, a known mode', async () => {
      let res = await t.request('POST', '/api/pipeline/jobs', { body: { project_id: project, name: 'bad', targets: [999_999] } });
      expect([res.status, res.body.errors]).toEqual([422, [{ path: 'body.targets.0', message: 'no such dataset' }]]);
      res = await t.request('POST', '/api/pipeline/jobs', { body: { project_id: project, name: 'bad', targets: [totals], mode: 'sometimes' } });
      expect(res.status).toBe(400);
      expect(res.body.errors[0].path).toBe('body.mode');
      res = await t.request('POST', '/api/pipeline/jobs', { body: { project_id: project, name: 'once', targets: [totals] } });
      expect(res.status).toBe(201);
      expect(res.body.mode).toBe('build');
      expect((await t.request('POST', '/api/pipeline/jobs', { body: { project_id: project, name: 'once', targets: [totals] } })).status).toBe(409);
      const patched = await t.request('PATCH', `/api/pipeline/jobs/${res.body.id}`, { body: { mode: 'force' } });
      expect(patched.body).toMatchObject({ name: 'once', mode: 'force', targets: [totals] });
      expect((await t.request('DELETE', `/api/pipeline/jobs/${res.body.id}`)).status).toBe(204);
      expect((await t.request('GET', `/api/pipeline/jobs/${res.body.id}`)).status).toBe(404);
    });
  });

  describe('the runs list', () => {
    it('answers newest first, a page at a time, filtered by status (several), kind, recipe, trigger, since and until', async () => {
      const all = (await t.request('GET', '/api/pipeline/runs?limit=500')).body.items as Record<string, any>[];
      expect(all.length).toBeGreaterThan(5);
      expect(all.map((r) => r.id)).toEqual([...all.map((r) => r.id)].sort((a, b) => b - a));
      const failed = (await t.request('GET', '/api/pipeline/runs?status=failed,skipped')).body.items as Record<string, any>[];
      expect(failed.length).toBeGreaterThan(0);
      expect(failed.every((r) => r.status === 'failed' || r.status === 'skipped')).toBe(true);
      const jobs = (await t.request('GET', '/api/pipeline/runs?kind=job&trigger=manual')).body.items as Record<string, any>[];
      expect(jobs.every((r) => r.kind === 'job' && r.trigger === 'manual')).toBe(true);
      const ofTotals = (await t.request('GET', `/api/pipeline/runs?recipe_id=${recipes.totals}`)).body.items as Record<string, any>[];
      expect(ofTotals.every((r) => r.recipe_id === recipes.totals)).toBe(true);
      const oldest = all.at(-1)!;
      const since = (await t.request('GET', `/api/pipeline/runs?since=${encodeURIComponent(oldest.created_at)}&limit=500`)).body.items;
      expect(since).toHaveLength(all.length);
      expect((await t.request('GET', `/api/pipeline/runs?until=${encodeURIComponent(oldest.created_at)}`)).body.items).toEqual([]);
      expect((await t.request('GET', '/api/pipeline/runs?since=2000-01-01&until=2000-01-02')).body.items).toEqual([]);

      const pages: number[] = [];
      let cursor: string | null = null;
      do {
        const page: { items: { id: number }[]; next_cursor: string | null } = (await t.request('GET', `/api/pipeline/runs?limit=3${cursor ? `&cursor=${cursor}` : ''}`)).body;
        pages.push(...page.items.map((r) => r.id));
        cursor = page.next_cursor;
      } while (cursor);
      expect(pages).toEqual(all.map((r) => r.id));
    });

    it('refuses bad filters with a 400 naming the parameter', async () => {
      for (const [query, path] of [
        ['status=exploded', 'query.status'],
        ['status=failed,', 'query.status'],
        ['since=yesterday', 'query.since'],
        ['until=2026-13-45', 'query.until'],
        ['limit=0', 'query.limit'],
        ['kind=batch', 'query.kind'],
        ['recipe_id=1e3', 'query.recipe_id'],
        ['cursor=not-a-cursor', 'query.cursor'],
        [`since=${'9'.repeat(5000)}`, 'query.since'],
        ['status=failed%00', 'query.status'],
      ]) {
        const res = await t.request('GET', `/api/pipeline/runs?${query}`);
        expect(res.status, query).toBe(400);
        expect(res.body.errors?.[0]?.path ?? res.body.detail, query).toContain(path);
      }
    });

    it('cancelling a finished run is a 409; an unknown run is a 404', async () => {
      const done = (await t.request('GET', '/api/pipeline/runs?status=succeeded&limit=1')).body.items[0];
      const res = await t.request('POST', `/api/pipeline/runs/${done.id}/cancel`);
      expect(res.status).toBe(409);
      expect(res.body.detail).toBe(`run ${done.id} already ended (succeeded)`);
      expect((await t.request('POST', '/api/pipeline/runs/999999/cancel')).status).toBe(404);
      expect((await t.request('GET', '/api/pipeline/runs/999999/logs')).status).toBe(404);
    });
  });

  it('names the jobs building what a change of columns touches, in the impact of that change', async () => {
    const res = await t.request('GET', `/api/lineage/datasets/${raw}/impact?columns=amount`);
    expect(res.status, res.text).toBe(200);
    const building = (res.body.jobs as { kind: string; dataset_id: number; plugin_id: string; columns: string[] }[]).filter((j) => j.dataset_id === totals);
    expect(building.length).toBeGreaterThan(0);
    expect(building[0]).toMatchObject({ kind: 'job', plugin_id: 'jobs', columns: ['total'] });
  });

  it("draws a project's flow: its datasets and recipes, with inputs from other projects, and each recipe's last run status", async () => {
    const res = await t.request('GET', `/api/pipeline/flows/${project}`);
    expect(res.status, res.text).toBe(200);
    const ids = res.body.nodes.map((n: { id: string }) => n.id);
    expect(ids).toEqual(expect.arrayContaining([`dataset:${raw}`, `dataset:${clean}`, `dataset:${totals}`, `recipe:${recipes.clean}`, `recipe:${recipes.totals}`]));
    expect(res.body.nodes.find((n: { id: string }) => n.id === `dataset:${raw}`)).toMatchObject({ kind: 'dataset', project_id: other, name: 'raw', type: null });
    expect(res.body.nodes.find((n: { id: string }) => n.id === `recipe:${recipes.totals}`)).toMatchObject({ kind: 'recipe', type: 'group', last_run_status: 'succeeded' });
    expect(res.body.edges).toEqual(expect.arrayContaining([
      { from: `dataset:${raw}`, to: `recipe:${recipes.clean}` },
      { from: `recipe:${recipes.clean}`, to: `dataset:${clean}` },
      { from: `dataset:${clean}`, to: `recipe:${recipes.totals}` },
    ]));
    expect((await t.request('GET', '/api/pipeline/flows/999999')).status).toBe(404);
  });
});
