import type { DataColumn } from '../../../storage/index.ts';

export interface PredictParams {
  model_id: number;
  version?: number;
  output_column?: string;
  probabilities?: boolean;
}

/** What a run scores with, fixed when it starts (the `start` call). */
export interface PredictStart {
  version: number;
  task: 'regression' | 'classification';
  /** The feature columns sent to the model, in order. */
  features: string[];
  output: string;
  /** The probabilities column, when asked. */
  probabilities: string | null;
  columns: DataColumn[];
}

export const PREDICT_PARAMS = {
  type: 'object',
  additionalProperties: false,
  required: ['model_id'],
  properties: {
    model_id: { type: 'integer', minimum: 1, description: 'A model of the registry, of this organization' },
    version: { type: 'integer', minimum: 1, description: 'The version scoring (default: the active one when the run starts)' },
    output_column: { type: 'string', minLength: 1, maxLength: 63, pattern: '^[A-Za-z_][A-Za-z0-9_]*$', description: 'The prediction column (default prediction)' },
    probabilities: { type: 'boolean', description: 'A classifier only: also write <output_column>_probabilities, each class\u2019s probability (json)' },
  },
};
