/**
 * The lineage plugin's public contract: how a plugin names what reads datasets (its consumers),
 * and the impact service (references and types only).
 */
import { defineExtensionPoint, pluginServiceRef, z } from '../../kernel/plugin-api.ts';

/** Some columns of a dataset. */
export interface DatasetColumns {
  dataset_id: number;
  columns: string[];
}

/** Something outside the pipeline that reads some columns of a dataset (an API service, a dashboard, a job). */
export interface LineageConsumer {
  /** What it is, e.g. `job`, `api_service`, `dashboard`. */
  kind: string;
  id: number | string;
  name: string;
  dataset_id: number;
  /** The columns of `dataset_id` it reads among those asked about. */
  columns: string[];
  /** What else names it, as its plugin describes it (an API Service endpoint: its service, key, endpoint and status). */
  details?: Record<string, string | number | boolean | null>;
}

/**
 * A plugin's consumers of the given columns of the organization's datasets: those reading any of
 * them (an empty answer when none does). Asked by impact analysis, once per question.
 */
export type LineageConsumerSource = (orgId: number, datasets: DatasetColumns[]) => Promise<LineageConsumer[]>;

/** Checked: a contribution must be a function (from code only: a manifest cannot hold one). */
export const lineageConsumers = defineExtensionPoint<LineageConsumerSource>({
  id: 'lineage.consumers',
  schema: z.custom<LineageConsumerSource>((value) => typeof value === 'function', 'must be a function (orgId, datasets) => Promise<consumers>'),
});

/** What changing some columns of a dataset would touch downstream. */
export interface Impact {
  dataset_id: number;
  /** The columns asked about (every column of the dataset when none was named). */
  columns: string[];
  /** Each downstream dataset with its columns computed, directly or not, from those columns. */
  datasets: { dataset_id: number; dataset: string | null; columns: string[] }[];
  /** The recipes those columns flow through. */
  recipes: { id: number; name: string; type: string }[];
  /** The consumers of kind `job`, also listed among `consumers`. */
  jobs: (LineageConsumer & { plugin_id: string })[];
  /** What the contributors of `lineage.consumers` say reads the dataset's or the affected columns. */
  consumers: (LineageConsumer & { plugin_id: string })[];
}

export interface LineageService {
  /**
   * The impact of changing `columns` of the dataset (all of its columns when omitted); a dataset
   * of another organization is a 404 problem. Columns are not checked against the dataset's
   * schema, so the impact of a column just removed can still be asked.
   */
  impact(orgId: number, datasetId: number, columns?: string[]): Promise<Impact>;
}

export const lineageService = pluginServiceRef<LineageService>('lineage.service');
