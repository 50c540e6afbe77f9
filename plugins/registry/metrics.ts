/** How a model does on the test split (spec: registry versions' metrics). */

export interface RegressionMetrics {
  r2: number | null;
  rmse: number;
  mae: number;
}

export interface ClassificationMetrics {
  accuracy: number;
  /** Of the positive class (the second of `labels`) with two classes, macro averaged with more. */
  precision: number;
  recall: number;
  f1: number;
  /** Two classes only: the area under the ROC curve of the positive class's probability. */
  roc_auc: number | null;
  /** `matrix[actual][predicted]`, both indexes into `labels`. */
  confusion_matrix: { labels: unknown[]; matrix: number[][] };
}

const round = (x: number) => Math.round(x * 1e6) / 1e6;

export function regressionMetrics(actual: number[], predicted: number[]): RegressionMetrics {
  const n = actual.length;
  const mean = actual.reduce((a, b) => a + b, 0) / n;
  let se = 0;
  let ae = 0;
  let total = 0;
  for (let i = 0; i < n; i++) {
    se += (actual[i] - predicted[i]) ** 2;
    ae += Math.abs(actual[i] - predicted[i]);
    total += (actual[i] - mean) ** 2;
  }
  // R² is undefined where the test split's target does not vary.
  return { r2: total === 0 ? null : round(1 - se / total), rmse: round(Math.sqrt(se / n)), mae: round(ae / n) };
}

/** `actual` and `predicted` are class indexes into `labels`; `positive` the positive class's probability per row (two classes). */
export function classificationMetrics(labels: unknown[], actual: number[], predicted: number[], positive: number[] | null): ClassificationMetrics {
  const k = labels.length;
  const matrix = labels.map(() => new Array<number>(k).fill(0));
  actual.forEach((a, i) => matrix[a][predicted[i]]++);
  const perClass = labels.map((_, c) => {
    const tp = matrix[c][c];
    const predictedC = matrix.reduce((sum, row) => sum + row[c], 0);
    const actualC = matrix[c].reduce((a, b) => a + b, 0);
    const precision = predictedC ? tp / predictedC : 0;
    const recall = actualC ? tp / actualC : 0;
    return { precision, recall, f1: precision + recall ? (2 * precision * recall) / (precision + recall) : 0 };
  });
  const averaged = k === 2 ? perClass[1] : { precision: mean(perClass.map((p) => p.precision)), recall: mean(perClass.map((p) => p.recall)), f1: mean(perClass.map((p) => p.f1)) };
  const correct = actual.filter((a, i) => a === predicted[i]).length;
  return {
    accuracy: round(correct / actual.length),
    precision: round(averaged.precision),
    recall: round(averaged.recall),
    f1: round(averaged.f1),
    roc_auc: k === 2 && positive ? rocAuc(actual, positive) : null,
    confusion_matrix: { labels, matrix },
  };
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** The probability that a positive row scores above a negative one (ties count half); null without both classes in the test split. */
function rocAuc(actual: number[], score: number[]): number | null {
  const pos = score.filter((_, i) => actual[i] === 1);
  const neg = score.filter((_, i) => actual[i] === 0);
  if (!pos.length || !neg.length) return null;
  let wins = 0;
  for (const p of pos) for (const n of neg) wins += p > n ? 1 : p === n ? 0.5 : 0;
  return round(wins / (pos.length * neg.length));
}
