import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { createRecipe, emptyDataset, finished, loadDataset, rowsOf, runRecipe } from '../pipeline/pipeline-helpers.ts';
import { importedModel, importOnnx, IRIS_FEATURES, IRIS_ONNX, IRIS_ROWS, irisLines } from './onnx-helpers.ts';

const COLUMNS = ['id:integer', ...IRIS_FEATURES.map((f) => `${f.name}:number`), 'species:string'];

describe.each(DIALECTS)('recipe type predict: batch scoring (%s)', (dialect) => {
  let t: TestKernel;
  let project: number;
  let iris: number;
  let trained: number;
  let onnx: number;

  const recipe = (name: string, params: Record<string, unknown>, inputs = [iris], outputs?: number[]) => ({ project_id: project, name, type: 'predict', inputs, outputs, params });

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    project = (await t.request('POST', '/api/projects', { body: { key: 'SCORE', name: 'Scoring' } })).body.id;
    iris = await loadDataset(t, project, 'iris', COLUMNS, irisLines(20));
    const started = await t.request('POST', '/api/registry/models', {
      body: { project_id: project, name: 'species', dataset_id: iris, target: 'species', features: IRIS_FEATURES.map((f) => f.name), task: 'classification', algorithm: 'decision_tree', params: {}, test_ratio: 0.2, seed: 5 },
    });
    expect(started.status, started.text).toBe(202);
    expect((await finished(t, started.body.run.id, 60_000)).status).toBe('succeeded');
    trained = started.body.model.id;
    onnx = await importedModel(t, project, 'iris onnx');
    expect((await importOnnx(t, onnx, IRIS_ONNX)).status).toBe(201);
  });
  afterAll(async () => t?.stop());

  it('scores a dataset with a trained model and with an ONNX model: the input rows plus the prediction', async () => {
    const out = await emptyDataset(t, project, 'scored_trained');
    const id = await createRecipe(t, recipe('score trained', { model_id: trained, probabilities: true }, [iris], [out]));
    // The output's columns are known from the definition, before any run.
    const schema = await t.request('GET', `/api/pipeline/recipes/${id}/schema`);
    expect(schema.status, schema.text).toBe(200);
    expect(schema.body.outputs[0].source).toBe('plan');
    expect(schema.body.outputs[0].columns.map((c: { name: string; type: string }) => `${c.name}:${c.type}`)).toEqual([...COLUMNS, 'prediction:string', 'prediction_probabilities:json']);
    const run = await runRecipe(t, id);
    expect(run.status, JSON.stringify(run)).toBe('succeeded');
    const rows = await rowsOf(t, out);
    expect(rows).toHaveLength(60);
    const right = rows.filter((r) => r.prediction === r.species).length;
    expect(right / rows.length).toBeGreaterThan(0.9);
    expect(Object.keys(rows[0].prediction_probabilities as object).sort()).toEqual(['setosa', 'versicolor', 'virginica']);
    const logs = await t.request('GET', `/api/pipeline/runs/${run.id}/logs`);
    expect(JSON.stringify(logs.body)).toMatch(/scored 60 rows of iris with version 1 of model/);

    // The ONNX model, on the iris rows its README lists (and the spread around each class's mean).
    const known = await loadDataset(t, project, 'known', COLUMNS, [...IRIS_ROWS.map((r, i) => `${100 + i},${Object.values(r).join(',')},${['setosa', 'versicolor', 'virginica'][i]}`), ...irisLines(10)]);
    const scored = await emptyDataset(t, project, 'scored_onnx');
    const onnxRecipe = await createRecipe(t, recipe('score onnx', { model_id: onnx, output_column: 'guess' }, [known], [scored]));
    expect((await runRecipe(t, onnxRecipe)).status).toBe('succeeded');
    const guessed = await rowsOf(t, scored);
    expect(guessed.slice(0, 3).map((r) => r.guess)).toEqual(['setosa', 'versicolor', 'virginica']);
    expect(guessed.filter((r) => r.guess === r.species).length / guessed.length).toBeGreaterThan(0.9);
    expect(guessed[0]).toMatchObject({ id: 100, sepal_length: 5.1, species: 'setosa' });
  });

  it('a pinned version scores even when another is active', async () => {
    const model = await importedModel(t, project, 'pinned');
    expect((await importOnnx(t, model, IRIS_ONNX)).status).toBe(201);
    expect((await importOnnx(t, model, IRIS_ONNX, IRIS_FEATURES, { task: 'classification' })).status).toBe(201);
    const out = await emptyDataset(t, project, 'scored_pinned');
    const id = await createRecipe(t, recipe('pinned', { model_id: model, version: 2 }, [iris], [out]));
    expect((await runRecipe(t, id)).status).toBe('succeeded');
    // Version 2 has no labels: its class indexes, as text.
    expect(new Set((await rowsOf(t, out)).map((r) => r.prediction))).toEqual(new Set(['0', '1', '2']));
  });

  it('refuses at create what cannot score: another organization\u2019s model, a missing feature, a taken column, bad params', async () => {
    const out = await emptyDataset(t, project, 'refused_out');
    const outsider = await t.outsider('predict-outsider');
    const theirs = (await t.request('POST', '/api/projects', { token: outsider.token, body: { key: 'THEIRS', name: 'Theirs' } })).body.id;
    const foreign = (await t.request('POST', '/api/registry/imported-models', { token: outsider.token, body: { project_id: theirs, name: 'theirs', task: 'classification' } })).body.id;
    const empty = await importedModel(t, project, 'no versions');
    const narrow = await loadDataset(t, project, 'narrow', ['id:integer', 'sepal_length:number', 'sepal_width:string'], ['1,5.1,wide']);
    const cases: [string, Record<string, unknown>, number[], number, string][] = [
      ['another organization\u2019s model', { model_id: foreign }, [iris], 422, 'body.params.model_id'],
      ['no such model', { model_id: 999999 }, [iris], 422, 'body.params.model_id'],
      ['no such version', { model_id: trained, version: 9 }, [iris], 422, 'body.params.version'],
      ['a model without a version', { model_id: empty }, [iris], 422, 'body.params.model_id'],
      ['an input without the features', { model_id: trained }, [narrow], 400, 'body.inputs.0'],
      ['an output column the input has', { model_id: trained, output_column: 'species' }, [iris], 400, 'body.params.output_column'],
      ['probabilities not a boolean', { model_id: trained, probabilities: 'yes' }, [iris], 400, 'body.params.probabilities'],
      ['no model_id', {}, [iris], 400, 'body.params'],
    ];
    for (const [why, params, inputs, status, path] of cases) {
      const res = await t.request('POST', '/api/pipeline/recipes', { body: recipe(`refused ${why}`, params, inputs, [out]) });
      expect(res.status, `${why}: ${res.text}`).toBe(status);
      expect(res.body.errors.map((e: { path: string }) => e.path).join(' '), why).toContain(path);
    }
    const narrowErrors = (await t.request('POST', '/api/pipeline/recipes', { body: recipe('narrow', { model_id: trained }, [narrow], [out]) })).body.errors.map((e: { message: string }) => e.message);
    expect(narrowErrors).toEqual([
      expect.stringMatching(/column sepal_width of dataset narrow is string: the model reads a number/),
      expect.stringMatching(/dataset narrow has no column petal_length/),
      expect.stringMatching(/dataset narrow has no column petal_width/),
    ]);
  });

  it('is refused where its plugin is disabled', async () => {
    const org = await t.outsider('predict-off');
    const inOrg = (more: Record<string, unknown> = {}) => ({ ...more, token: org.token, headers: { 'X-Org-Id': String(org.orgId) } });
    const off = await t.request('PUT', `/api/plugins/recipe_predict/organizations/${org.orgId}`, { headers: { 'X-Org-Id': String(org.orgId) }, body: { enabled: false } });
    expect(off.status, off.text).toBe(200);
    const theirs = (await t.request('POST', '/api/projects', inOrg({ body: { key: 'OFF', name: 'Off' } }))).body.id;
    const data = await loadDataset(t, theirs, 'iris_off', COLUMNS, irisLines(2), { token: org.token });
    const out = await emptyDataset(t, theirs, 'out_off', org.token);
    const model = (await t.request('POST', '/api/registry/imported-models', inOrg({ body: { project_id: theirs, name: 'm', task: 'classification' } }))).body.id;
    expect((await importOnnx(t, model, IRIS_ONNX, IRIS_FEATURES, undefined, org.token)).status).toBe(201);
    const listed = await t.request('GET', '/api/plugins/recipe-types', inOrg());
    expect(listed.body.map((type: { id: string }) => type.id)).not.toContain('predict');
    const refused = await t.request('POST', '/api/pipeline/recipes', inOrg({ body: { project_id: theirs, name: 'p', type: 'predict', inputs: [data], outputs: [out], params: { model_id: model } } }));
    expect(refused.status, refused.text).toBe(422);
    expect(refused.body.errors).toEqual([{ path: 'body.type', message: 'unknown recipe type predict' }]);
    // Offered in the admin's organization all along.
    expect((await t.request('GET', '/api/plugins/recipe-types')).body.map((type: { id: string }) => type.id)).toContain('predict');
  });
});
