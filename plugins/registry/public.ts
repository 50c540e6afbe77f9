/** The registry plugin's public contract: models as other plugins serve them (a publishing `model` endpoint). */
import { pluginServiceRef } from '../../kernel/plugin-api.ts';

export interface Predictions {
  predictions: unknown[];
  /** A classifier's probability of each class (by the class's value as text), per row. */
  probabilities?: Record<string, number>[];
  /** The version that answered. */
  version: number;
}

export interface RegistryModels {
  /** Whether the model is one of the organization's (with its active version, null when none is). */
  find(orgId: number, modelId: number): Promise<{ id: number; name: string; active_version: number | null } | null>;
  /**
   * What `version` (null: the active one) predicts from: its task and features (name and type:
   * integer, number, string, boolean). A model not of the organization is a 404; no such version,
   * or one not ready, a 409 (as `predict`).
   */
  signature(orgId: number, modelId: number, version: number | null): Promise<{ version: number; task: 'regression' | 'classification'; features: { name: string; type: 'integer' | 'number' | 'string' | 'boolean' }[] }>;
  /**
   * Predictions of `version` (null: the active one) for `rows`, each an object of the version's
   * features: a row missing a feature or with a value of the wrong type is a 400 naming
   * `body.rows.<i>.<feature>`; a model not of the organization a 404; no such version, or one not
   * trained, a 409.
   */
  predict(orgId: number, modelId: number, version: number | null, rows: Record<string, unknown>[]): Promise<Predictions>;
}

export const registryModels = pluginServiceRef<RegistryModels>('registry.models');
