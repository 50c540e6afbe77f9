/**
 * Training and prediction, free of the platform (the training worker runs `train`, the registry's
 * service `predictWith`): split by seed, encode, fit, score on the test split.
 */
import { fit, load, type Algorithm, type Predictor, type Task } from './algorithms.ts';
import { encodedWidths, encodeRow, fitEncodings, type Feature, type FeatureEncoding } from './encoding.ts';

/** Values of the encoded training matrix at most (rows × encoded columns, held as JS numbers in the training thread). */
const MAX_ENCODED_CELLS = 20_000_000;
import { classificationMetrics, regressionMetrics, type ClassificationMetrics, type RegressionMetrics } from './metrics.ts';

export interface TrainingRequest {
  algorithm: Algorithm;
  task: Task;
  params: Record<string, unknown>;
  features: Feature[];
  target: string;
  test_ratio: number;
  seed: number;
  /** The dataset's rows by column: `columns[name][r]`. */
  columns: Record<string, unknown[]>;
  rows: number;
}

/** What prediction needs of a trained version, stored with it. */
export interface ModelArtifact {
  algorithm: Algorithm;
  task: Task;
  features: Feature[];
  encodings: FeatureEncoding[];
  /** A classification's classes (its target's values, sorted); the model predicts indexes into it. */
  classes: unknown[] | null;
  /** The library's own JSON (toJSON). */
  model: unknown;
}

export interface TrainingResult {
  artifact: ModelArtifact;
  metrics: RegressionMetrics | ClassificationMetrics;
  /** Per feature, the share of the score lost when its values are shuffled (trees and forests); null otherwise. */
  feature_importance: Record<string, number> | null;
  training_rows: number;
  test_rows: number;
}

/** Training rows permutation importance scores on at most (the first of the shuffled split): enough for shares, bounded in time. */
const IMPORTANCE_ROWS = 5000;

/** A deterministic generator of numbers in [0, 1) (mulberry32): the same seed splits the same way. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffled(n: number, next: () => number): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

const sortValues = (a: unknown, b: unknown) => (typeof a === 'number' && typeof b === 'number' ? a - b : String(a).localeCompare(String(b)));

/** Trains on the rows whose target is set; a throw says why it cannot (too few rows, a single class). */
export function train(request: TrainingRequest): TrainingResult {
  const targets = request.columns[request.target];
  const usable = Array.from({ length: request.rows }, (_, r) => r).filter((r) => targets[r] !== null && targets[r] !== undefined);
  if (usable.length < 2) throw new Error(`the dataset holds ${usable.length} row(s) with a ${request.target}: training needs at least 2`);
  const order = shuffled(usable.length, random(request.seed)).map((i) => usable[i]);
  const testCount = Math.min(usable.length - 1, Math.max(1, Math.round(usable.length * request.test_ratio)));
  const test = order.slice(0, testCount);
  const training = order.slice(testCount);

  const linear = request.algorithm === 'linear' || request.algorithm === 'logistic';
  const encodings = fitEncodings(request.features, (name) => training.map((r) => request.columns[name][r]), linear);
  const encode = (rows: number[]) => rows.map((r) => encodeRow(encodings, request.features.map((f) => request.columns[f.name][r])));
  const width = encodedWidths(encodings).reduce((a, b) => a + b, 0);
  if (training.length * width > MAX_ENCODED_CELLS) throw new Error(`${training.length} training rows × ${width} encoded columns is more than ${MAX_ENCODED_CELLS} values: use fewer rows or features`);
  const classification = request.task === 'classification';
  const classes = classification ? [...new Set(training.map((r) => targets[r]))].sort(sortValues) : null;
  if (classes && classes.length < 2) throw new Error(`the training split holds a single class of ${request.target} (${String(classes[0])}): classification needs two or more`);
  const label = (r: number) => (classes ? classes.indexOf(targets[r]) : Number(targets[r]));

  const xTrain = encode(training);
  const yTrain = training.map(label);
  const model = fit(request.algorithm, request.task, request.params, xTrain, yTrain, request.seed);
  const predictor = load(request.algorithm, request.task, model, classes?.length ?? 0);

  const xTest = encode(test);
  const predicted = predictor.predict(xTest);
  let metrics: RegressionMetrics | ClassificationMetrics;
  if (classes) {
    // A test row of a class the training split never saw counts as wrong (its index is none the model answers).
    const actual = test.map((r) => classes.indexOf(targets[r]));
    const known = test.map((_, i) => i).filter((i) => actual[i] >= 0);
    metrics = classificationMetrics(
      classes,
      known.map((i) => actual[i]),
      known.map((i) => predicted.values[i]),
      classes.length === 2 && predicted.probabilities ? known.map((i) => predicted.probabilities![i][1]) : null,
    );
  } else {
    metrics = regressionMetrics(test.map(label), predicted.values);
  }
  const importance = request.algorithm === 'decision_tree' || request.algorithm === 'random_forest' ? permutationImportance(predictor, encodings, xTrain.slice(0, IMPORTANCE_ROWS), yTrain.slice(0, IMPORTANCE_ROWS), classification, request.seed) : null;
  return { artifact: { algorithm: request.algorithm, task: request.task, features: request.features, encodings, classes, model }, metrics, feature_importance: importance, training_rows: training.length, test_rows: test.length };
}

/**
 * Permutation importance on (up to IMPORTANCE_ROWS of) the training split: how much of the score (accuracy, or R² as 1 −
 * squared error over variance) is lost when a feature's encoded columns are shuffled across rows,
 * as a share of all features' losses.
 */
function permutationImportance(predictor: Predictor, encodings: FeatureEncoding[], x: number[][], y: number[], classification: boolean, seed: number): Record<string, number> {
  const mean = y.reduce((a, b) => a + b, 0) / y.length;
  const variance = y.reduce((a, v) => a + (v - mean) ** 2, 0) || 1;
  const score = (rows: number[][]) => {
    const values = predictor.predict(rows).values;
    return classification ? values.filter((v, i) => v === y[i]).length / y.length : 1 - values.reduce((a, v, i) => a + (v - y[i]) ** 2, 0) / variance;
  };
  const baseline = score(x);
  const widths = encodedWidths(encodings);
  const next = random(seed);
  let offset = 0;
  const losses = encodings.map((_, f) => {
    const start = offset;
    offset += widths[f];
    const order = shuffled(x.length, next);
    const permuted = x.map((row, i) => [...row.slice(0, start), ...x[order[i]].slice(start, start + widths[f]), ...row.slice(start + widths[f])]);
    return Math.max(0, baseline - score(permuted));
  });
  const total = losses.reduce((a, b) => a + b, 0);
  return Object.fromEntries(encodings.map((e, f) => [e.name, total > 0 ? Math.round((losses[f] / total) * 1e6) / 1e6 : 0]));
}

/** A stored artifact as a predictor (for `predictWith`). */
export function predictorOf(artifact: ModelArtifact): Predictor {
  return load(artifact.algorithm, artifact.task, artifact.model, artifact.classes?.length ?? 0);
}

/**
 * Predictions for rows already checked against the artifact's features: values (a class as the
 * target's value) and, for a classifier, each row's probability per class.
 */
export function predictWith(artifact: ModelArtifact, predictor: Predictor, rows: Record<string, unknown>[]): { predictions: unknown[]; probabilities?: Record<string, number>[] } {
  const x = rows.map((row) => encodeRow(artifact.encodings, artifact.features.map((f) => row[f.name] ?? null)));
  const result = predictor.predict(x);
  if (!artifact.classes) return { predictions: result.values };
  const classes = artifact.classes;
  return {
    predictions: result.values.map((v) => classes[v]),
    ...(result.probabilities ? { probabilities: result.probabilities.map((p) => Object.fromEntries(classes.map((c, i) => [String(c), Math.round(p[i] * 1e6) / 1e6]))) } : {}),
  };
}
