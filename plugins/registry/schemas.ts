import { identitySchemas as s, z } from '../../kernel/plugin-api.ts';
import { runSchema } from '../pipeline/public.ts';
import { ALGORITHMS, TASKS } from './algorithms.ts';

const text = (max: number) =>
  z
    .string()
    .trim()
    .min(1)
    .max(max)
    .regex(/^[^\u0000-\u001f]*$/, 'must not hold control characters');

export const trainInput = z.object({
  project_id: s.recordId,
  name: s.displayName.describe('The model: a new version of the project\u2019s model of that name, the model created with it when there is none'),
  dataset_id: s.recordId.describe('The dataset trained on, read with the caller\u2019s rights (row policies apply)'),
  target: text(200).describe('The column predicted'),
  features: z.array(text(200)).min(1).max(200).describe('The columns it is predicted from: integer and number columns, string and boolean ones one-hot encoded'),
  task: z.enum(TASKS),
  algorithm: z.enum(ALGORITHMS).describe('linear: regression only; logistic: classification only; decision_tree and random_forest: both'),
  params: z.record(z.string(), z.unknown()).default({}).describe('Checked against the algorithm\u2019s JSON Schema (GET /api/registry/algorithms)'),
  test_ratio: z.number().gt(0).max(0.9).default(0.2).describe('The share of rows held out to score the model'),
  seed: z.number().int().min(0).max(2_147_483_647).default(42).describe('The train/test split (and a forest\u2019s sampling) follow it: the same seed, the same split'),
});
export type TrainInput = z.infer<typeof trainInput>;

export const modelSchema = z
  .object({ id: z.number().int(), project_id: z.number().int(), name: z.string(), task: z.enum(TASKS), active_version: z.number().int().nullable(), created_at: z.string(), updated_at: z.string() })
  .meta({ id: 'RegistryModel' });

export const versionSchema = z
  .object({
    version: z.number().int(),
    status: z.enum(['training', 'ready', 'failed', 'cancelled']),
    algorithm: z.enum([...ALGORITHMS, 'onnx']).describe('onnx: imported (POST /api/registry/models/{id}/versions), not trained here'),
    dataset_id: z.number().int().nullable().describe('The dataset trained on (null: imported)'),
    target: z.string().describe('The column predicted (an imported model: the output read)'),
    features: z.array(z.object({ name: z.string(), type: z.string() })),
    params: z.record(z.string(), z.unknown()).describe('The algorithm\u2019s params; an imported model\u2019s: {output: {name, task, labels?}} as declared'),
    test_ratio: z.number(),
    seed: z.number().int(),
    run_id: z.number().int().nullable(),
    metrics: z.record(z.string(), z.unknown()).nullable().describe('On the test split. Regression: r2, rmse, mae; classification: accuracy, precision, recall, f1 (macro with more than two classes), roc_auc (two classes), confusion_matrix'),
    feature_importance: z.record(z.string(), z.number()).nullable().describe('Permutation importance (decision_tree, random_forest): each feature\u2019s share of the score lost when its values are shuffled'),
    training_rows: z.number().int().nullable(),
    test_rows: z.number().int().nullable(),
    dataset_version: z.number().int().nullable(),
    trained_at: z.string().nullable(),
    error: z.string().nullable(),
    created_at: z.string(),
  })
  .meta({ id: 'RegistryModelVersion' });

export const importedModelInput = z.object({
  project_id: s.recordId,
  name: s.displayName.describe('Unique in the project'),
  task: z.enum(TASKS),
});

export const trainAnswer = z.object({ model: modelSchema, version: versionSchema, run: runSchema }).meta({ id: 'RegistryTrainingStarted' });

export const predictInput = z.object({ rows: z.array(z.record(z.string(), z.unknown())).min(1).max(10_000) });
export const predictAnswer = z
  .object({
    predictions: z.array(z.unknown()),
    probabilities: z.array(z.record(z.string(), z.number())).optional().describe('A classifier\u2019s probability of each class, per row'),
    version: z.number().int(),
  })
  .meta({ id: 'RegistryPredictions' });
