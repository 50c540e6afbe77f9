/**
 * The datasets plugin's public contract: what plugins depending on it may import (references and
 * types only).
 */
import type { RawBuilder } from 'kysely';
import { pluginServiceRef, type Principal } from '../../kernel/plugin-api.ts';
import type { DataColumnType } from '../../storage/index.ts';

/** What a caller without `datasets.pii.read` sees in place of a PII value, on every read path. */
export const PII_MASK = '***';

export interface DatasetInfo {
  id: number;
  org_id: number;
  name: string;
  columns: { name: string; type: DataColumnType; pii: boolean }[];
  row_count: number;
  version: number;
  /** When the data or the schema last changed. */
  updated_at: string;
}

export interface DatasetCatalog {
  /** The dataset if it belongs to the organization, else a 404 problem. */
  get(orgId: number, id: number): Promise<DatasetInfo>;
  /** The organization's datasets with these names (names are matched ignoring case). */
  findByNames(orgId: number, names: string[]): Promise<DatasetInfo[]>;
  /** The dataset's table, for queries pushed down to the database. */
  table(dataset: DatasetInfo): RawBuilder<unknown>;
  /**
   * The rows the caller may read under the dataset's row policies: a condition on the dataset's
   * table (null: every row) and a key naming that scope, for caches.
   */
  scope(principal: Principal, dataset: DatasetInfo): Promise<{ condition: RawBuilder<boolean> | null; key: string }>;
  /** Whether the caller sees the values of PII columns (`datasets.pii.read`). */
  seesPii(principal: Principal): boolean;
  /**
   * Loads typed rows into a dataset all or nothing (as an upload does): `replace` takes `columns` as
   * the new schema, `append` needs the dataset's columns.
   */
  load(dataset: DatasetInfo, columns: { name: string; type: DataColumnType }[], batches: AsyncIterable<unknown[][]>, mode: 'append' | 'replace'): Promise<{ dataset: DatasetInfo; loaded: number }>;
  /** Turns a stored value back into its API value. */
  decode(type: DataColumnType, value: unknown): unknown;
}

export const datasetCatalog = pluginServiceRef<DatasetCatalog>('datasets.catalog');
