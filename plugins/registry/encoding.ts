/**
 * Features as numbers for the ml.js models, fitted on the training split only: a numeric feature
 * is standardized (a missing value takes the training mean, so it lands on 0); a categorical one
 * (string or boolean) is one-hot over the categories the training split holds, so a missing or
 * unseen category is all zeros. For linear and logistic models the first category has no column
 * (it is what all zeros means): with one per category, the columns of each feature would add up
 * to the intercept and the least squares would have no single solution.
 */

/** A feature as training saw it: `type` is its dataset column's. */
export interface Feature {
  name: string;
  type: 'integer' | 'number' | 'string' | 'boolean';
}

export type FeatureEncoding =
  | { name: string; kind: 'numeric'; mean: number; scale: number }
  | { name: string; kind: 'categorical'; categories: string[]; first_dropped: boolean };

export const isCategorical = (type: Feature['type']) => type === 'string' || type === 'boolean';

/** A value as one category's text (booleans as true/false); null when missing. */
const category = (value: unknown): string | null => (value === null || value === undefined ? null : String(value));

const numeric = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null);

/** Categories a categorical feature may have: an identifier-like text (an e-mail, an id) is no feature, and one-hot columns grow with it. */
export const MAX_CATEGORIES = 1_000;

/** The encodings of `features` fitted on the training rows (by column: `column(name)` answers its values). */
export function fitEncodings(features: Feature[], column: (name: string) => unknown[], dropFirst: boolean): FeatureEncoding[] {
  return features.map((feature) => {
    const values = column(feature.name);
    if (isCategorical(feature.type)) {
      const categories = [...new Set(values.map(category).filter((c): c is string => c !== null))].sort();
      if (categories.length > MAX_CATEGORIES) throw new Error(`feature ${feature.name} has ${categories.length} distinct values in the training split (at most ${MAX_CATEGORIES} for a categorical feature)`);
      return { name: feature.name, kind: 'categorical', categories, first_dropped: dropFirst };
    }
    const present = values.map(numeric).filter((v): v is number => v !== null);
    const mean = present.length ? present.reduce((a, b) => a + b, 0) / present.length : 0;
    const variance = present.length ? present.reduce((a, v) => a + (v - mean) ** 2, 0) / present.length : 0;
    return { name: feature.name, kind: 'numeric', mean, scale: Math.sqrt(variance) || 1 };
  });
}

/** The encoded columns of each feature, in order: one for a numeric feature, one per category for a categorical one. */
export function encodedWidths(encodings: FeatureEncoding[]): number[] {
  return encodings.map((e) => (e.kind === 'numeric' ? 1 : columnsOf(e).length));
}

/** The categories with a column of their own. */
const columnsOf = (e: Extract<FeatureEncoding, { kind: 'categorical' }>) => (e.first_dropped ? e.categories.slice(1) : e.categories);

/** One row (values in the order of `encodings`) as numbers. */
export function encodeRow(encodings: FeatureEncoding[], values: unknown[]): number[] {
  const out: number[] = [];
  encodings.forEach((e, i) => {
    if (e.kind === 'numeric') {
      const v = numeric(values[i]);
      out.push(v === null ? 0 : (v - e.mean) / e.scale);
    } else {
      const c = category(values[i]);
      for (const known of columnsOf(e)) out.push(c === known ? 1 : 0);
    }
  });
  return out;
}

/**
 * Why a value does not fit a feature at prediction (null: it fits). Null is a missing value,
 * handled as at training.
 */
export function valueProblem(feature: Feature, value: unknown): string | null {
  if (value === null) return null;
  if (feature.type === 'string') return typeof value === 'string' ? null : 'expected a string';
  if (feature.type === 'boolean') return typeof value === 'boolean' ? null : 'expected a boolean';
  if (typeof value !== 'number' || !Number.isFinite(value)) return 'expected a number';
  return feature.type === 'integer' && !Number.isInteger(value) ? 'expected an integer' : null;
}
