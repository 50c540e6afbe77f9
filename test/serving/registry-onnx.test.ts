import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ModelStore } from '../../plugins/registry/model-store.ts';
import { RegistryService } from '../../plugins/registry/registry-service.ts';
import type { PipelineRuns } from '../../plugins/pipeline/public.ts';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { finished, loadDataset } from '../pipeline/pipeline-helpers.ts';
import { importedModel, importOnnx, IRIS_FEATURES, IRIS_ONNX, IRIS_OUTPUT, IRIS_ROWS, irisLines } from './onnx-helpers.ts';

describe.each(DIALECTS)('model registry: ONNX import (%s)', (dialect) => {
  let t: TestKernel;
  let project: number;

  const predict = (model: number, rows: unknown[]) => t.request('POST', `/api/registry/models/${model}/predict`, { body: { rows } });
  const versions = async (model: number) => (await t.request('GET', `/api/registry/models/${model}/versions`)).body.items as Record<string, any>[];

  beforeAll(async () => {
    // 1kb: the fixture (698 bytes) fits, a larger file does not.
    t = await startTestKernel({ dialect, env: { REGISTRY_ONNX_LIMIT: '1kb' } });
    project = (await t.request('POST', '/api/projects', { body: { key: 'ONNX', name: 'Imported models' } })).body.id;
  });
  afterAll(async () => t?.stop());

  it('imports onnxruntime\u2019s iris logistic regression and predicts the iris classes', async () => {
    const model = await importedModel(t, project, 'iris');
    const res = await importOnnx(t, model, IRIS_ONNX);
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ version: 1, status: 'ready', algorithm: 'onnx', dataset_id: null, target: 'output_label', metrics: null, features: IRIS_FEATURES, params: { output: IRIS_OUTPUT } });
    expect((await t.request('GET', `/api/registry/models/${model}`)).body.active_version).toBe(1);
    const predicted = await predict(model, IRIS_ROWS);
    expect(predicted.status, predicted.text).toBe(200);
    expect(predicted.body).toEqual({ predictions: ['setosa', 'versicolor', 'virginica'], version: 1 });
    // Without labels, the model's own class indexes.
    const bare = await importOnnx(t, model, IRIS_ONNX, IRIS_FEATURES, { task: 'classification' });
    expect(bare.status, bare.text).toBe(201);
    expect(bare.body.target).toBe('output_label');
    const indexes = await t.request('POST', `/api/registry/models/${model}/active`, { body: { version: 2 } });
    expect(indexes.status).toBe(200);
    expect((await predict(model, IRIS_ROWS)).body.predictions).toEqual([0, 1, 2]);
    // A row missing a feature, or with a string for a number: 400 naming row and field.
    const bad = await predict(model, [{ ...IRIS_ROWS[0], petal_width: 'wide' }, { sepal_length: 5 }]);
    expect(bad.status).toBe(400);
    expect(bad.body.errors.map((e: { path: string }) => e.path)).toEqual(['body.rows.0.petal_width', 'body.rows.1.sepal_width', 'body.rows.1.petal_length', 'body.rows.1.petal_width']);
  });

  it('refuses what is not a fitting ONNX model, naming what is wrong, and stores nothing', async () => {
    const model = await importedModel(t, project, 'refused');
    const cases: [string, Buffer, unknown, unknown, number, string][] = [
      ['not ONNX', Buffer.from('sepal_length,sepal_width\n5.1,3.5\n'), IRIS_FEATURES, IRIS_OUTPUT, 400, 'body.file'],
      ['truncated', IRIS_ONNX.subarray(0, 300), IRIS_FEATURES, IRIS_OUTPUT, 400, 'body.file'],
      ['NUL bytes', Buffer.alloc(512), IRIS_FEATURES, IRIS_OUTPUT, 400, 'body.file'],
      ['three features for a model of four', IRIS_ONNX, IRIS_FEATURES.slice(0, 3), IRIS_OUTPUT, 400, 'body.features'],
      ['a string feature for a float input', IRIS_ONNX, [{ name: 'species', type: 'string' }, ...IRIS_FEATURES.slice(1)], IRIS_OUTPUT, 400, 'body.features.0.type'],
      ['an output the model lacks', IRIS_ONNX, IRIS_FEATURES, { ...IRIS_OUTPUT, name: 'score' }, 400, 'body.output'],
      ['a ZipMap output (not a tensor)', IRIS_ONNX, IRIS_FEATURES, { ...IRIS_OUTPUT, name: 'output_probability' }, 400, 'body.output'],
      ['another task than the model\u2019s', IRIS_ONNX, IRIS_FEATURES, { task: 'regression' }, 400, 'body.output.task'],
      ['features not JSON', IRIS_ONNX, '[{"name":', IRIS_OUTPUT, 400, 'body.features'],
      ['an unknown feature type', IRIS_ONNX, [{ name: 'x', type: 'date' }], IRIS_OUTPUT, 400, 'body.features.0.type'],
      ['output missing', IRIS_ONNX, IRIS_FEATURES, null, 400, 'body.output'],
    ];
    for (const [why, file, features, output, status, path] of cases) {
      const res = await importOnnx(t, model, file, features, output);
      expect(res.status, `${why}: ${res.text}`).toBe(status);
      expect(res.body.errors.map((e: { path: string }) => e.path), why).toContain(path);
    }
    const oversized = await importOnnx(t, model, Buffer.concat([IRIS_ONNX, Buffer.alloc(2048)]));
    expect(oversized.status, oversized.text).toBe(413);
    expect(oversized.body.detail).toMatch(/REGISTRY_ONNX_LIMIT \(1kb\)/);
    expect(await versions(model)).toEqual([]);
    expect((await t.request('GET', `/api/registry/models/${model}`)).body.active_version).toBeNull();
    // Another organization's model is not there to import into.
    const outsider = await t.outsider('onnx-outsider');
    expect((await importOnnx(t, model, IRIS_ONNX, IRIS_FEATURES, IRIS_OUTPUT, outsider.token)).status).toBe(404);
    // A viewer may not import.
    const viewer = await t.userToken('viewer', 'onnx-viewer');
    expect((await importOnnx(t, model, IRIS_ONNX, IRIS_FEATURES, IRIS_OUTPUT, viewer.token)).status).toBe(403);
    expect((await t.request('POST', '/api/registry/imported-models', { body: { project_id: project, name: 'refused', task: 'classification' } })).status).toBe(409);
  });

  it('promotes and rolls back between a trained and an imported version', async () => {
    const dataset = await loadDataset(t, project, 'iris', ['id:integer', ...IRIS_FEATURES.map((f) => `${f.name}:number`), 'species:string'], irisLines(20));
    const started = await t.request('POST', '/api/registry/models', {
      body: { project_id: project, name: 'mixed', dataset_id: dataset, target: 'species', features: IRIS_FEATURES.map((f) => f.name), task: 'classification', algorithm: 'decision_tree', params: {}, test_ratio: 0.2, seed: 3 },
    });
    expect(started.status, started.text).toBe(202);
    expect((await finished(t, started.body.run.id, 60_000)).status).toBe('succeeded');
    const model = started.body.model.id;
    const imported = await importOnnx(t, model, IRIS_ONNX);
    expect(imported.status, imported.text).toBe(201);
    expect(imported.body.version).toBe(2);
    // The trained version stays active until the import is promoted.
    const trained = await predict(model, IRIS_ROWS);
    expect(trained.body.version).toBe(1);
    expect(trained.body.probabilities).toHaveLength(3);
    expect((await t.request('POST', `/api/registry/models/${model}/active`, { body: { version: 2 } })).status).toBe(200);
    const onnx = await predict(model, IRIS_ROWS);
    expect(onnx.body).toEqual({ predictions: ['setosa', 'versicolor', 'virginica'], version: 2 });
    expect((await t.request('POST', `/api/registry/models/${model}/active`, { body: { version: 1 } })).status).toBe(200);
    expect((await predict(model, IRIS_ROWS)).body.version).toBe(1);
    expect((await versions(model)).map((v) => [v.version, v.algorithm])).toEqual([
      [1, 'decision_tree'],
      [2, 'onnx'],
    ]);
  });

  it('a burst of first predictions of an imported version loads it once (one read, one ONNX session)', async () => {
    const model = await importedModel(t, project, 'burst');
    expect((await importOnnx(t, model, IRIS_ONNX)).status).toBe(201);
    const { org_id: orgId } = (await t.request('GET', `/api/projects/${project}`)).body;
    // A service of its own over the kernel's real storage: it has loaded nothing, and its store's reads can be counted.
    const store = new ModelStore(t.kernel.storage);
    const service = new RegistryService(store, {} as PipelineRuns); // runs: read by versions() only
    const reads = vi.spyOn(store, 'artifact');
    try {
      const answers = await Promise.all(Array.from({ length: 16 }, () => service.predict(Number(orgId), model, null, IRIS_ROWS)));
      for (const answer of answers) expect(answer.predictions).toEqual(['setosa', 'versicolor', 'virginica']);
      expect(reads).toHaveBeenCalledTimes(1);
    } finally {
      await service.dispose();
    }
  });
});
