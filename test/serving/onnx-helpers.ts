import { readFileSync } from 'node:fs';
import type { TestKernel } from '../harness/index.ts';

/** onnxruntime's iris logistic regression (test/fixtures/onnx/README.txt). */
export const IRIS_ONNX = readFileSync(new URL('../fixtures/onnx/logreg_iris.onnx', import.meta.url));
export const IRIS_FEATURES = ['sepal_length', 'sepal_width', 'petal_length', 'petal_width'].map((name) => ({ name, type: 'number' }));
export const IRIS_OUTPUT = { name: 'output_label', task: 'classification', labels: ['setosa', 'versicolor', 'virginica'] };
/** Iris rows of each class (the data set's first of each), as the fixture's README lists them. */
export const IRIS_ROWS = [
  { sepal_length: 5.1, sepal_width: 3.5, petal_length: 1.4, petal_width: 0.2 },
  { sepal_length: 6.7, sepal_width: 3.1, petal_length: 4.4, petal_width: 1.4 },
  { sepal_length: 6.3, sepal_width: 3.3, petal_length: 6.0, petal_width: 2.5 },
];

/** POSTs an ONNX import form (binary file: the harness's requester sends text bodies only); a null declaration is left out. */
export async function importOnnx(t: TestKernel, modelId: number, file: Buffer, features: unknown = IRIS_FEATURES, output: unknown = IRIS_OUTPUT, token = t.adminToken) {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(file)]), 'model.onnx');
  if (features !== null) form.append('features', typeof features === 'string' ? features : JSON.stringify(features));
  if (output !== null) form.append('output', typeof output === 'string' ? output : JSON.stringify(output));
  const response = await fetch(`${t.url}/api/registry/models/${modelId}/versions`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null, text };
}

/** A model record to import into. */
export async function importedModel(t: TestKernel, projectId: number, name: string, task = 'classification'): Promise<number> {
  const res = await t.request('POST', '/api/registry/imported-models', { body: { project_id: projectId, name, task } });
  if (res.status !== 201) throw new Error(res.text);
  return res.body.id;
}

/** Rows around each iris class's mean (a deterministic spread), as CSV lines `id,<4 features>,species`. */
export function irisLines(perClass: number): string[] {
  const means = { setosa: [5.0, 3.4, 1.5, 0.25], versicolor: [5.9, 2.8, 4.3, 1.3], virginica: [6.6, 3.0, 5.6, 2.0] };
  return Object.entries(means).flatMap(([species, mean], c) =>
    Array.from({ length: perClass }, (_, i) => {
      const jitter = (((i * 7 + c * 3) % 11) - 5) / 50;
      return `${c * perClass + i},${mean.map((m) => (m + jitter).toFixed(2)).join(',')},${species}`;
    }),
  );
}
