import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ModelStore } from '../../plugins/registry/model-store.ts';
import { RegistryService } from '../../plugins/registry/registry-service.ts';
import type { PipelineRuns } from '../../plugins/pipeline/public.ts';
import { DIALECTS, startTestKernel, until, type TestKernel } from '../harness/index.ts';
import { finished, loadDataset } from '../pipeline/pipeline-helpers.ts';

/** A deterministic generator in [0, 1): the datasets are the same on every run. */
function generator(seed: number) {
  let s = seed;
  return () => (s = (s * 16807) % 2147483647) / 2147483647;
}

/** y = 2x + 1 + small noise, a category that does not matter, a boolean; 120 rows. */
function linearRows(): string[] {
  const r = generator(11);
  return Array.from({ length: 120 }, (_, i) => {
    const x = r() * 10;
    return `${i},${x.toFixed(4)},${(2 * x + 1 + (r() - 0.5) * 0.2).toFixed(4)},${['red', 'green', 'blue'][i % 3]},${i % 2 === 0}`;
  });
}

/** Two classes separable by x1 + x2 > 10 (yes/no), and three by x1's range (iris-like). */
function classRows(): string[] {
  const r = generator(23);
  return Array.from({ length: 150 }, (_, i) => {
    const x1 = r() * 10;
    const x2 = r() * 10;
    const kind = x1 < 3.3 ? 'setosa' : x1 < 6.6 ? 'versicolor' : 'virginica';
    return `${i},${x1.toFixed(3)},${x2.toFixed(3)},${x1 + x2 > 10 ? 'yes' : 'no'},${kind},${['a', 'b'][i % 2]}`;
  });
}

describe.each(DIALECTS)('model registry (%s)', (dialect) => {
  let t: TestKernel;
  let project: number;
  let linear: number;
  let classes: number;
  let pii: number;
  let single: number;

  const train = (body: Record<string, unknown>, token?: string) => t.request('POST', '/api/registry/models', { token, body: { project_id: project, test_ratio: 0.2, seed: 7, params: {}, ...body } });
  /** Trains to the end; answers the model id and the version as listed. */
  const trained = async (body: Record<string, unknown>) => {
    const started = await train(body);
    expect(started.status, started.text).toBe(202);
    expect(started.body.run).toMatchObject({ kind: 'training' });
    const run = await finished(t, started.body.run.id, 60_000);
    expect(run.status, JSON.stringify(run)).toBe('succeeded');
    const versions = await t.request('GET', `/api/registry/models/${started.body.model.id}/versions`);
    const version = versions.body.items.find((v: { version: number }) => v.version === started.body.version.version);
    expect(version.status).toBe('ready');
    return { model: started.body.model.id as number, version, run: run.id as number };
  };
  const predict = (model: number, rows: unknown[], token?: string) => t.request('POST', `/api/registry/models/${model}/predict`, { token, body: { rows } });

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    project = (await t.request('POST', '/api/projects', { body: { key: 'ML', name: 'Models' } })).body.id;
    linear = await loadDataset(t, project, 'linear', ['id:integer', 'x:number', 'y:number', 'color:string', 'flag:boolean'], linearRows());
    classes = await loadDataset(t, project, 'classes', ['id:integer', 'x1:number', 'x2:number', 'label:string', 'kind:string', 'side:string'], classRows());
    pii = await loadDataset(t, project, 'people', ['id:integer', 'email:string', 'age:integer', 'score:number'], Array.from({ length: 20 }, (_, i) => `${i},p${i}@example.test,${20 + i},${i * 1.5}`), { pii: ['email'] });
    single = await loadDataset(t, project, 'single', ['id:integer', 'x:number', 'label:string'], Array.from({ length: 20 }, (_, i) => `${i},${i},same`));
  });
  afterAll(async () => t?.stop());

  it('linear regression learns y = 2x + 1 (r2 > 0.9), predicts it, and its run is listed with kind training', async () => {
    const { model, version, run } = await trained({ name: 'linear', dataset_id: linear, target: 'y', features: ['x', 'color', 'flag'], task: 'regression', algorithm: 'linear' });
    expect(version).toMatchObject({ version: 1, algorithm: 'linear', target: 'y', training_rows: 96, test_rows: 24, dataset_version: expect.any(Number), trained_at: expect.any(String), feature_importance: null });
    expect(version.features).toEqual([{ name: 'x', type: 'number' }, { name: 'color', type: 'string' }, { name: 'flag', type: 'boolean' }]);
    expect(version.metrics.r2).toBeGreaterThan(0.9);
    expect(version.metrics).toMatchObject({ rmse: expect.any(Number), mae: expect.any(Number) });
    expect((await t.request('GET', `/api/registry/models/${model}`)).body).toMatchObject({ id: model, name: 'linear', task: 'regression', active_version: 1 });
    // An unseen color and a missing flag: the first category's (all zeros), as the README says.
    const res = await predict(model, [{ x: 3, color: 'red', flag: true }, { x: 0, color: 'purple', flag: null }]);
    expect(res.status, res.text).toBe(200);
    expect(res.body.version).toBe(1);
    expect(res.body.predictions[0]).toBeCloseTo(7, 0);
    expect(res.body.predictions[1]).toBeCloseTo(1, 0);
    expect(res.body.probabilities).toBeUndefined();
    const listed = await t.request('GET', '/api/pipeline/runs?kind=training');
    expect(listed.body.items.map((r: { id: number }) => r.id)).toContain(run);
    const logs = await t.request('GET', `/api/pipeline/runs/${run}/logs`);
    expect(JSON.stringify(logs.body)).toMatch(/read 120 rows of dataset linear/);
  });

  it('logistic, decision tree and random forest classify separable data; metrics and probabilities present', async () => {
    for (const algorithm of ['logistic', 'decision_tree', 'random_forest']) {
      const { model, version } = await trained({ name: `yes-no ${algorithm}`, dataset_id: classes, target: 'label', features: ['x1', 'x2', 'side'], task: 'classification', algorithm, params: algorithm === 'random_forest' ? { n_estimators: 20 } : {} });
      expect(version.metrics.accuracy, algorithm).toBeGreaterThan(0.85);
      expect(version.metrics).toMatchObject({ precision: expect.any(Number), recall: expect.any(Number), f1: expect.any(Number), roc_auc: expect.any(Number), confusion_matrix: { labels: ['no', 'yes'], matrix: expect.any(Array) } });
      if (algorithm === 'logistic') expect(version.feature_importance).toBeNull();
      else expect(Object.keys(version.feature_importance).sort()).toEqual(['side', 'x1', 'x2']);
      const res = await predict(model, [{ x1: 9, x2: 9, side: 'a' }, { x1: 0.5, x2: 1, side: 'b' }]);
      expect(res.status, res.text).toBe(200);
      expect(res.body.predictions, algorithm).toEqual(['yes', 'no']);
      expect(res.body.probabilities[0].yes).toBeGreaterThan(0.5);
      expect(Object.keys(res.body.probabilities[1]).sort()).toEqual(['no', 'yes']);
    }
  });

  it('three classes: macro metrics without roc_auc; a regression tree and forest', async () => {
    const { model, version } = await trained({ name: 'kinds', dataset_id: classes, target: 'kind', features: ['x1', 'x2'], task: 'classification', algorithm: 'decision_tree' });
    expect(version.metrics.accuracy).toBeGreaterThan(0.85);
    expect(version.metrics.roc_auc).toBeNull();
    expect(version.metrics.confusion_matrix.labels).toEqual(['setosa', 'versicolor', 'virginica']);
    expect((await predict(model, [{ x1: 1, x2: 5 }, { x1: 9, x2: 5 }])).body.predictions).toEqual(['setosa', 'virginica']);
    for (const algorithm of ['decision_tree', 'random_forest']) {
      const reg = await trained({ name: `tree ${algorithm}`, dataset_id: linear, target: 'y', features: ['x'], task: 'regression', algorithm, params: algorithm === 'random_forest' ? { n_estimators: 10 } : { max_depth: 8 } });
      expect(reg.version.metrics.r2, algorithm).toBeGreaterThan(0.9);
    }
  });

  it('versions are numbered; promote and roll back (audited); predictions follow the active version', async () => {
    const first = await trained({ name: 'promoted', dataset_id: linear, target: 'y', features: ['x'], task: 'regression', algorithm: 'linear' });
    const second = await trained({ name: 'promoted', dataset_id: linear, target: 'y', features: ['x'], task: 'regression', algorithm: 'decision_tree', params: { max_depth: 2 } });
    expect(second.model).toBe(first.model);
    expect(second.version.version).toBe(2);
    const at = { x: 4.2 };
    expect((await predict(first.model, [at])).body.version).toBe(1);
    const promoted = await t.request('POST', `/api/registry/models/${first.model}/active`, { body: { version: 2 } });
    expect(promoted.status, promoted.text).toBe(200);
    expect(promoted.body.active_version).toBe(2);
    const byTree = await predict(first.model, [at]);
    expect(byTree.body.version).toBe(2);
    const back = await t.request('POST', `/api/registry/models/${first.model}/active`, { body: { version: 1 } });
    expect(back.body.active_version).toBe(1);
    const byLine = await predict(first.model, [at]);
    expect(byLine.body.version).toBe(1);
    expect(byLine.body.predictions[0]).toBeCloseTo(9.4, 0);
    expect(byLine.body.predictions[0]).not.toBe(byTree.body.predictions[0]);
    const audit = await t.request('GET', '/api/audit?action=registry.model.activate');
    expect(audit.status, audit.text).toBe(200);
    expect(JSON.stringify(audit.body)).toMatch(/"to":1/);
    expect((await t.request('POST', `/api/registry/models/${first.model}/active`, { body: { version: 9 } })).body.errors).toEqual([{ path: 'body.version', message: 'no such version' }]);
    const versions = await t.request('GET', `/api/registry/models/${first.model}/versions`);
    expect(versions.body.items.map((v: { version: number; algorithm: string }) => [v.version, v.algorithm])).toEqual([[1, 'linear'], [2, 'decision_tree']]);
  });

  it('every bad training input is a 4xx naming the field', async () => {
    const good = { name: 'bad', dataset_id: linear, target: 'y', features: ['x'], task: 'regression', algorithm: 'linear' };
    const cases: [Record<string, unknown>, number, string][] = [
      [{ dataset_id: 999_999 }, 422, 'body.dataset_id'],
      [{ project_id: 999_999 }, 422, 'body.project_id'],
      [{ target: 'nope' }, 400, 'body.target'],
      [{ features: ['x', 'nope'] }, 400, 'body.features.1'],
      [{ features: ['x', 'y'] }, 400, 'body.features.1'],
      [{ features: ['x', 'x'] }, 400, 'body.features.1'],
      [{ features: [] }, 400, 'body.features'],
      [{ task: 'clustering' }, 400, 'body.task'],
      [{ algorithm: 'svm' }, 400, 'body.algorithm'],
      [{ algorithm: 'logistic' }, 400, 'body.algorithm'],
      [{ task: 'classification', target: 'color' }, 400, 'body.algorithm'],
      [{ task: 'classification', algorithm: 'decision_tree', target: 'x', features: ['color'] }, 400, 'body.target'],
      [{ target: 'color' }, 400, 'body.target'],
      [{ params: { intercept: 'yes' } }, 400, 'body.params.intercept'],
      [{ params: { depth: 3 } }, 400, 'body.params.depth'],
      [{ algorithm: 'random_forest', params: { n_estimators: 0 } }, 400, 'body.params.n_estimators'],
      [{ test_ratio: 0 }, 400, 'body.test_ratio'],
      [{ test_ratio: 0.95 }, 400, 'body.test_ratio'],
      [{ seed: -1 }, 400, 'body.seed'],
      [{ name: 'quo"te\u0000' }, 400, 'body.name'],
      [{ name: 'n'.repeat(5000) }, 400, 'body.name'],
      [{ target: `y'; DROP TABLE registry_models; --` }, 400, 'body.target'],
      [{ features: ['x\u0000'] }, 400, 'body.features.0'],
    ];
    for (const [change, status, path] of cases) {
      const res = await train({ ...good, ...change });
      expect(res.status, `${JSON.stringify(change).slice(0, 80)}: ${res.text}`).toBe(status);
      expect(res.body.errors?.map((e: { path: string }) => e.path), JSON.stringify(change).slice(0, 80)).toContain(path);
    }
    // A name with quotes is a name like any other.
    const quoted = await trained({ ...good, name: `it's "quoted" <b>` });
    expect((await t.request('GET', `/api/registry/models/${quoted.model}`)).body.name).toBe(`it's "quoted" <b>`);
    // The model of that name is a regression model.
    const other = await train({ ...good, name: 'linear', task: 'classification', algorithm: 'decision_tree', target: 'color', features: ['x'] });
    expect([other.status, other.body.errors]).toEqual([409, [{ path: 'body.task', message: 'the model is a regression model' }]]);
  });

  it('PII columns need datasets.pii.read: refused (403 naming the field) for an editor, trained for an admin', async () => {
    const editor = await t.userToken('editor', 'registry-editor');
    const refused = await train({ name: 'pii', dataset_id: pii, target: 'score', features: ['age', 'email'], task: 'regression', algorithm: 'decision_tree' }, editor.token);
    expect([refused.status, refused.body.errors]).toEqual([403, [{ path: 'body.features.1', message: 'is a PII column' }]]);
    const allowed = await train({ name: 'no pii', dataset_id: pii, target: 'score', features: ['age'], task: 'regression', algorithm: 'linear' }, editor.token);
    expect(allowed.status, allowed.text).toBe(202);
    expect((await finished(t, allowed.body.run.id)).status).toBe('succeeded');
    await trained({ name: 'pii admin', dataset_id: pii, target: 'score', features: ['age', 'email'], task: 'regression', algorithm: 'decision_tree' });
    const viewer = await t.userToken('viewer', 'registry-viewer');
    expect((await train({ name: 'viewer', dataset_id: pii, target: 'score', features: ['age'], task: 'regression', algorithm: 'linear' }, viewer.token)).status).toBe(403);
  });

  it('refuses a PII column as the classes of a classification, for everyone (a class is shown to every reader of the model)', async () => {
    const refused = await train({ name: 'pii classes', dataset_id: pii, target: 'email', features: ['age'], task: 'classification', algorithm: 'decision_tree' });
    expect([refused.status, refused.body.errors]).toEqual([400, [{ path: 'body.target', message: 'is a PII column' }]]);
  });

  it('ends failed, naming the feature, a training on a text with more distinct values than a categorical feature may have', async () => {
    const ids = await loadDataset(t, project, 'ids', ['code:string', 'y:number'], Array.from({ length: 1_200 }, (_, i) => `code-${i},${i % 7}`));
    const started = await train({ name: 'ids', dataset_id: ids, target: 'y', features: ['code'], task: 'regression', algorithm: 'decision_tree', test_ratio: 0.1 });
    expect(started.status, started.text).toBe(202);
    const run = await finished(t, started.body.run.id, 60_000);
    expect(run.status).toBe('failed');
    expect(run.error.detail).toMatch(/feature code has \d+ distinct values in the training split \(at most 1000/);
  });

  it('a training that cannot succeed (a single class) ends failed with the reason', async () => {
    const started = await train({ name: 'single', dataset_id: single, target: 'label', features: ['x'], task: 'classification', algorithm: 'logistic' });
    expect(started.status, started.text).toBe(202);
    const run = await finished(t, started.body.run.id);
    expect(run.status).toBe('failed');
    expect(run.error.detail).toMatch(/single class/);
    const versions = await t.request('GET', `/api/registry/models/${started.body.model.id}/versions`);
    expect(versions.body.items[0]).toMatchObject({ status: 'failed', error: expect.stringMatching(/single class/) });
    expect((await predict(started.body.model.id, [{ x: 1 }])).status).toBe(409);
    expect((await t.request('POST', `/api/registry/models/${started.body.model.id}/active`, { body: { version: 1 } })).status).toBe(409);
  });

  it('predict refuses a row missing a feature or with a wrong type, naming row and field', async () => {
    const { model } = await trained({ name: 'strict', dataset_id: linear, target: 'y', features: ['x', 'color', 'flag'], task: 'regression', algorithm: 'linear' });
    const cases: [unknown[], string][] = [
      [[{ x: 1, color: 'red', flag: true }, { color: 'red', flag: true }], 'body.rows.1.x'],
      [[{ x: '1', color: 'red', flag: true }], 'body.rows.0.x'],
      [[{ x: 1, color: 3, flag: true }], 'body.rows.0.color'],
      [[{ x: 1, color: 'red', flag: 'yes' }], 'body.rows.0.flag'],
      [[{ x: 1, color: `'red"; --`, flag: true }, { x: 1, color: 'red' }], 'body.rows.1.flag'],
      [[{ x: 1, color: 'red\u0000', flag: true }], 'body.rows.0.color'],
    ];
    for (const [rows, path] of cases) {
      const res = await predict(model, rows);
      expect(res.status, res.text).toBe(400);
      expect(res.body.errors.map((e: { path: string }) => e.path)).toEqual([path]);
    }
    expect((await predict(model, [])).status).toBe(400);
    expect((await t.request('POST', `/api/registry/models/${model}/predict`, { body: { rows: 'x' } })).status).toBe(400);
    expect((await predict(999_999, [{ x: 1 }])).status).toBe(404);
  });

  it('a training run is cancelled with POST /api/pipeline/runs/{id}/cancel; the model cannot be deleted while training, then can', async () => {
    const started = await train({ name: 'slow', dataset_id: classes, target: 'label', features: ['x1', 'x2', 'side'], task: 'classification', algorithm: 'logistic', params: { num_steps: 100000 } });
    expect(started.status, started.text).toBe(202);
    const model = started.body.model.id;
    expect((await t.request('DELETE', `/api/registry/models/${model}`)).status).toBe(409);
    const cancel = await t.request('POST', `/api/pipeline/runs/${started.body.run.id}/cancel`);
    expect(cancel.status, cancel.text).toBe(200);
    const run = await finished(t, started.body.run.id);
    expect(run.status).toBe('cancelled');
    const version = await until(async () => (await t.request('GET', `/api/registry/models/${model}/versions`)).body.items[0], (v) => v.status !== 'training');
    expect(version.status).toBe('cancelled');
    expect((await t.request('DELETE', `/api/registry/models/${model}`)).status).toBe(204);
    expect((await t.request('GET', `/api/registry/models/${model}`)).status).toBe(404);
    expect((await t.request('GET', '/api/registry/models')).body.items.map((m: { id: number }) => m.id)).not.toContain(model);
  });

  it('a project holding a model cannot be deleted (409) until the model is', async () => {
    const other = (await t.request('POST', '/api/projects', { body: { key: 'ML2', name: 'More models' } })).body.id;
    const started = await t.request('POST', '/api/registry/models', { body: { project_id: other, name: 'elsewhere', dataset_id: linear, target: 'y', features: ['x'], task: 'regression', algorithm: 'linear' } });
    expect(started.status, started.text).toBe(202);
    await finished(t, started.body.run.id);
    const refused = await t.request('DELETE', `/api/projects/${other}`);
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toMatch(/1 model/);
    const { db } = t.kernel.storage;
    const versionIds = (await db.selectFrom('registry_model_versions').select('id').where('model_id', '=', started.body.model.id).execute()).map((v) => v.id);
    const stored = () => db.selectFrom('registry_model_artifacts').select('version_id').where('version_id', 'in', versionIds).execute();
    expect(await stored()).toHaveLength(1);
    expect((await t.request('DELETE', `/api/registry/models/${started.body.model.id}`)).status).toBe(204);
    // The trained model goes with its version.
    expect(await stored()).toHaveLength(0);
    expect((await t.request('DELETE', `/api/projects/${other}`)).status).toBe(204);
  });

  it('off for the organization: its routes answer 404; a training run started before ends trained or refused as not offered', async () => {
    const started = await train({ name: 'switched', dataset_id: linear, target: 'y', features: ['x'], task: 'regression', algorithm: 'random_forest', params: { n_estimators: 500 } });
    expect(started.status, started.text).toBe(202);
    const off = await t.request('PUT', '/api/plugins/registry/organizations/1', { body: { enabled: false } });
    expect(off.status, off.text).toBe(200);
    try {
      expect((await t.request('GET', '/api/registry/models')).status).toBe(404);
      expect((await predict(started.body.model.id, [{ x: 1 }])).status).toBe(404);
      const run = await finished(t, started.body.run.id, 60_000);
      // Either it was claimed before the switch (and trains to its end) or after it (refused as not offered).
      if (run.status === 'failed') expect(run.error.detail).toMatch(/no run kind training is offered/);
      else expect(run.status).toBe('succeeded');
    } finally {
      expect((await t.request('PUT', '/api/plugins/registry/organizations/1', { body: { enabled: true } })).status).toBe(200);
    }
    expect((await t.request('GET', '/api/registry/models')).status).toBe(200);
  });

  it('the server keeps answering while a large forest scores many rows in its prediction thread', async () => {
    const { model } = await trained({ name: 'big forest', dataset_id: classes, target: 'label', features: ['x1', 'x2', 'side'], task: 'classification', algorithm: 'random_forest', params: { n_estimators: 500 } });
    const rows = Array.from({ length: 10_000 }, (_, i) => ({ x1: (i % 97) / 10, x2: (i % 89) / 10, side: i % 2 ? 'left' : 'right' }));
    const started = performance.now();
    let scored = false;
    const scoring = predict(model, rows).finally(() => (scored = true));
    // Requests one after another while it scores: on the event loop, the scoring would hold them all
    // for most of its time; in its thread, no wait between two answers comes near that.
    let last = started;
    let longestWait = 0;
    while (!scored) {
      expect((await t.request('GET', '/healthz', { token: null })).status).toBe(200);
      longestWait = Math.max(longestWait, performance.now() - last);
      last = performance.now();
    }
    const answer = await scoring;
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body.predictions).toHaveLength(10_000);
    expect(longestWait).toBeLessThan((performance.now() - started) / 2);
  });

  it('a burst of first predictions of a version loads it once, its artifact parsed in the prediction thread only', async () => {
    const { model } = await trained({ name: 'burst forest', dataset_id: classes, target: 'label', features: ['x1', 'x2', 'side'], task: 'classification', algorithm: 'random_forest', params: { n_estimators: 50 } });
    const { org_id: orgId } = (await t.request('GET', `/api/projects/${project}`)).body;
    // A service of its own over the kernel's real storage, so that its store's reads can be counted.
    const store = new ModelStore(t.kernel.storage);
    const service = new RegistryService(store, {} as PipelineRuns); // runs: read by versions() only
    const texts = vi.spyOn(store, 'artifactText');
    const parsed = vi.spyOn(store, 'artifact');
    try {
      const rows = [{ x1: 1, x2: 2, side: 'a' }];
      const answers = await Promise.all(Array.from({ length: 16 }, () => service.predict(Number(orgId), model, null, rows)));
      for (const answer of answers) expect(answer.predictions).toEqual(answers[0].predictions);
      expect(texts).toHaveBeenCalledTimes(1);
      expect(parsed).not.toHaveBeenCalled();
    } finally {
      await service.dispose();
    }
  });

  it('the server keeps serving while a model trains in its thread; cancelling the running training stops it', async () => {
    const started = await train({ name: 'busy', dataset_id: classes, target: 'label', features: ['x1', 'x2', 'side'], task: 'classification', algorithm: 'logistic', params: { num_steps: 100000 } });
    const runId = started.body.run.id;
    await until(async () => (await t.request('GET', `/api/pipeline/runs/${runId}/logs`)).text, (text) => text.includes('read 150 rows'));
    const t0 = Date.now();
    expect((await t.request('GET', '/api/registry/models')).status).toBe(200);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect((await t.request('GET', `/api/pipeline/runs/${runId}`)).body.status).toBe('running');
    expect((await t.request('POST', `/api/pipeline/runs/${runId}/cancel`)).status).toBe(200);
    const run = await finished(t, runId, 10_000);
    expect(run.status).toBe('cancelled');
    expect((await t.request('GET', `/api/registry/models/${started.body.model.id}/versions`)).body.items[0]).toMatchObject({ status: 'cancelled', error: 'the work was cancelled' });
  });
});
