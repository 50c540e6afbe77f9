/**
 * The four algorithms over the ml.js family: each fits encoded rows (class indexes as the target
 * of a classification) into the library's own JSON (`toJSON`), and loads that JSON back into a
 * predictor answering values (class indexes for a classification) and, for classifiers, each row's
 * probability per class.
 */
import { DecisionTreeClassifier, DecisionTreeRegression } from 'ml-cart';
import LogisticRegression from 'ml-logistic-regression';
import { Matrix } from 'ml-matrix';
import { RandomForestClassifier, RandomForestRegression } from 'ml-random-forest';
import MultivariateLinearRegression from 'ml-regression-multivariate-linear';

export const ALGORITHMS = ['linear', 'logistic', 'decision_tree', 'random_forest'] as const;
export type Algorithm = (typeof ALGORITHMS)[number];
export const TASKS = ['regression', 'classification'] as const;
export type Task = (typeof TASKS)[number];

/** The only task of an algorithm that has one (trees do both). */
export const ONLY_TASK: Partial<Record<Algorithm, Task>> = { linear: 'regression', logistic: 'classification' };

const depth = { type: 'integer', minimum: 1, maximum: 64, description: 'How deep a tree may grow (default: no limit)' };
const minSamples = { type: 'integer', minimum: 1, maximum: 100000, description: 'Rows at most in a node that is not split further (default 3)' };

/** The JSON Schema of each algorithm's `params` (ajv, draft 2020-12). */
export const PARAMS_SCHEMAS: Record<Algorithm, Record<string, unknown>> = {
  linear: { type: 'object', additionalProperties: false, properties: { intercept: { type: 'boolean', description: 'Fit an intercept (default true)' } } },
  logistic: {
    type: 'object',
    additionalProperties: false,
    properties: {
      num_steps: { type: 'integer', minimum: 1, maximum: 100000, description: 'Gradient steps (default 2000)' },
      learning_rate: { type: 'number', exclusiveMinimum: 0, maximum: 10, description: 'Step size on the mean gradient over standardized features (default 0.5)' },
    },
  },
  decision_tree: { type: 'object', additionalProperties: false, properties: { max_depth: depth, min_samples: minSamples } },
  random_forest: {
    type: 'object',
    additionalProperties: false,
    properties: {
      n_estimators: { type: 'integer', minimum: 1, maximum: 500, description: 'Trees (default 50)' },
      max_features: { type: 'number', exclusiveMinimum: 0, maximum: 1, description: 'Share of the features each tree sees (default 1)' },
      max_depth: depth,
      min_samples: minSamples,
    },
  },
};

export interface Predictor {
  predict(x: number[][]): { values: number[]; probabilities: number[][] | null };
}

const treeOptions = (p: Record<string, any>) => ({ maxDepth: p.max_depth ?? Infinity, minNumSamples: p.min_samples ?? 3 });

/** Fits the model and answers its JSON. */
export function fit(algorithm: Algorithm, task: Task, params: Record<string, any>, x: number[][], y: number[], seed: number): unknown {
  const classifier = task === 'classification';
  switch (algorithm) {
    case 'linear':
      return new MultivariateLinearRegression(x, y.map((v) => [v]), { intercept: params.intercept ?? true, statistics: false }).toJSON();
    case 'logistic': {
      const model = new LogisticRegression({ numSteps: params.num_steps ?? 2000, learningRate: (params.learning_rate ?? 0.5) / x.length });
      model.train(withBias(x), Matrix.columnVector(y));
      return model.toJSON();
    }
    case 'decision_tree': {
      const model = classifier ? new DecisionTreeClassifier(treeOptions(params)) : new DecisionTreeRegression(treeOptions(params));
      model.train(x, y);
      return model.toJSON();
    }
    case 'random_forest': {
      // The library's seed must be a 32-bit integer.
      const options = { nEstimators: params.n_estimators ?? 50, maxFeatures: params.max_features ?? 1, seed: seed | 0, noOOB: true, treeOptions: treeOptions(params) };
      const model = classifier ? new RandomForestClassifier(options) : new RandomForestRegression(options);
      model.train(x, y);
      return model.toJSON();
    }
  }
}

/** A fitted model's JSON as a predictor. */
export function load(algorithm: Algorithm, task: Task, json: unknown, classes: number): Predictor {
  const classifier = task === 'classification';
  switch (algorithm) {
    case 'linear': {
      const model = MultivariateLinearRegression.load(json as MultivariateLinearRegression.MLRModel);
      return { predict: (x) => ({ values: model.predict(x).map((row) => row[0]), probabilities: null }) };
    }
    case 'logistic': {
      const model = LogisticRegression.load(json);
      return {
        predict(x) {
          // One against all: classifier j scores the chance a row is NOT class j (the library's labels).
          const scores = model.classifiers.map((c) => c.testScores(withBias(x)));
          return fromProbabilities(x.map((_, i) => normalize(scores.map((s) => 1 - s[i]))));
        },
      };
    }
    case 'decision_tree': {
      if (!classifier) {
        const model = DecisionTreeRegression.load(json);
        return { predict: (x) => ({ values: model.predict(x), probabilities: null }) };
      }
      const model = DecisionTreeClassifier.load(json);
      // A leaf's class distribution (the library's prediction is its largest), padded to every class.
      return { predict: (x) => fromProbabilities(x.map((row) => padded((model.root.classify(row) as { to1DArray(): number[] }).to1DArray(), classes))) };
    }
    case 'random_forest': {
      if (!classifier) {
        const model = RandomForestRegression.load(json as any);
        return { predict: (x) => ({ values: model.predict(x), probabilities: null }) };
      }
      const model = RandomForestClassifier.load(json as any);
      // The share of the trees voting for each class.
      return {
        predict(x) {
          const votes = model.predictionValues(x);
          return fromProbabilities(x.map((_, i) => normalize(votes.getRow(i).reduce((shares: number[], v: number) => (shares[v]++, shares), new Array(classes).fill(0)))));
        },
      };
    }
  }
}

function withBias(x: number[][]): Matrix {
  return new Matrix(x.map((row) => [1, ...row]));
}

function normalize(xs: number[]): number[] {
  const sum = xs.reduce((a, b) => a + b, 0);
  return sum > 0 ? xs.map((v) => v / sum) : xs.map(() => 1 / xs.length);
}

function padded(xs: number[], length: number): number[] {
  return normalize(Array.from({ length }, (_, i) => xs[i] ?? 0));
}

/** Each row's class: the most probable (the first on a tie). */
function fromProbabilities(probabilities: number[][]) {
  return { values: probabilities.map((p) => p.indexOf(Math.max(...p))), probabilities };
}
