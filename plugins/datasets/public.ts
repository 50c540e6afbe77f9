/**
 * The datasets plugin's public contract: what plugins depending on it may import (references and
 * types only).
 */
import type { RawBuilder } from 'kysely';
import { z } from 'zod';
import { pluginServiceRef, type Maybe, type Principal } from '../../kernel/plugin-api.ts';
import type { DataColumn, DataColumnType, GovernedDataset } from '../../storage/index.ts';

/** The capability to see every row of every dataset, whatever its row policies. */
export const ROW_POLICY_BYPASS = 'datasets.policies.bypass';

/** What a caller without `datasets.pii.read` sees in place of a PII value, on every read path. */
export const PII_MASK = '***';

/** One value of a data column as the API answers it, for the schemas of the answers that carry values (rows, SQL results, profiles). */
export const dataValueSchema = z
  .union([z.string(), z.number(), z.boolean(), z.null(), z.array(z.unknown()), z.record(z.string(), z.unknown())])
  .meta({
    id: 'DataValue',
    description: `A value of a data column: a string (dates and timestamps as ISO 8601 text; a PII value as ${PII_MASK} without datasets.pii.read), a number, a boolean, null, or the JSON value of a json column`,
  });

export interface DatasetInfo {
  id: number;
  org_id: number;
  project_id: number;
  name: string;
  columns: { name: string; type: DataColumnType; pii: boolean }[];
  row_count: number;
  version: number;
  /** When the data or the schema last changed. */
  updated_at: string;
}

/** The options of `GET /api/datasets/{id}/rows`, for `DatasetCatalog.rows`. */
export interface RowsQuery {
  /** Rows per page: 1 to `ROWS_PAGE_MAX`. */
  limit: number;
  /** The `next_cursor` of the previous page. */
  cursor?: string;
  /** Rows to skip (with a sort; a cursor takes precedence). */
  offset?: number;
  /** `col` ascending, `-col` descending, comma-separated. */
  sort?: string;
  /** `col:op:value`, ANDed; `in` takes comma-separated values, `is_null` true or false. */
  filter?: string[];
  /**
   * Conditions named by column rather than by text, ANDed with `filter`: the column's value is one of
   * `values` (null: is null). A column name holding `:` or a value holding `,` is exact here.
   */
  oneOf?: { column: string; values: readonly unknown[] }[];
  /** Comma-separated column names; default all. */
  columns?: string;
}

/** The most rows one page may hold, on every path (route or service). */
export const ROWS_PAGE_MAX = 1000;

/** The most rows (and the default) of one page of `DatasetCatalog.stream`. */
export const ROWS_STREAM_PAGE_MAX = 10_000;

/**
 * A page of rows of `DatasetCatalog.stream`, by column (cheap to hand between threads: a few arrays,
 * not an object per row): `values[i][r]` is the value of `columns[i]` in the page's row `r`.
 */
export interface RowsBlock {
  columns: string[];
  values: unknown[][];
  /** The rows of the page. */
  rows: number;
}

/** A page of rows as `GET /api/datasets/{id}/rows` answers it. */
export interface RowsPage {
  /** `masked`: a PII column shown as `PII_MASK` to this caller. */
  columns: { name: string; type: string; masked: boolean }[];
  rows: Record<string, unknown>[];
  next_cursor: string | null;
}

/** A new dataset as `DatasetCatalog.create` takes it (as the body of `POST /api/datasets`, without `project_id`). */
export interface NewDatasetInput {
  name: string;
  description?: string | null;
  columns?: { name: string; type: DataColumnType; pii?: boolean; description?: string | null }[];
}

export interface DatasetCatalog {
  /** The dataset if it belongs to the organization, else a 404 problem; at hand (not a promise) when kept in memory, so `await` it. */
  get(orgId: number, id: number): Maybe<DatasetInfo>;
  /**
   * Creates a dataset in a project exactly as `POST /api/datasets` does (same checks, each problem
   * naming the field under `body`: a bad name or column 400, a name taken 409, no such project
   * 422), `principal`'s user recorded as its author. Auditing is the caller's business.
   */
  create(orgId: number, projectId: number, input: NewDatasetInput, principal: Principal): Promise<DatasetInfo>;
  /**
   * Sets the dataset's description and the descriptions of the columns it has (matched by name;
   * others are ignored: a dataset not built yet has none). `changed`: whether anything differed.
   */
  describe(orgId: number, id: number, docs: { description?: string | null; columns?: { name: string; description: string | null }[] }): Promise<{ dataset: DatasetInfo; changed: boolean }>;
  /** Deletes the dataset and its data as `DELETE /api/datasets/{id}` does (`datasets.deleted` published). */
  remove(orgId: number, id: number): Promise<void>;
  /** The datasets of a project of the organization, by id. */
  inProject(orgId: number, projectId: number): Promise<DatasetInfo[]>;
  /** The organization's datasets with these names (names are matched ignoring case). */
  findByNames(orgId: number, names: string[]): Promise<DatasetInfo[]>;
  /** The dataset's table, for queries pushed down to the database. */
  table(dataset: DatasetInfo): RawBuilder<unknown>;
  /**
   * The rows the caller may read under the dataset's row policies: a condition on the dataset's
   * table (null: every row) and a key naming that scope, for caches. At hand (not a promise) when
   * the policies and the caller's groups are in memory.
   */
  scope(principal: Principal, dataset: DatasetInfo): Maybe<{ condition: RawBuilder<boolean> | null; key: string }>;
  /** Whether the caller sees the values of PII columns (`datasets.pii.read`). */
  seesPii(principal: Principal): boolean;
  /**
   * The dataset as governed SQL reads it for the caller (`Storage.runReadOnly`, `writeGoverned`),
   * named `name` (default: its own name): PII columns masked without `datasets.pii.read`, rows
   * limited by its row policies (written in as literals, so a statement's own $1, $2… keep their
   * numbers). Null: the platform describing a statement, which reads no row: nothing masked or limited.
   */
  governed(principal: Principal | null, dataset: DatasetInfo, name?: string): Promise<GovernedDataset>;
  /**
   * Loads typed rows into a dataset all or nothing (as an upload does): `replace` takes `columns` as
   * the new schema (a column flagged `pii` is PII from then on), `append` needs the dataset's columns.
   */
  load(dataset: DatasetInfo, columns: { name: string; type: DataColumnType; pii?: boolean }[], batches: AsyncIterable<unknown[][]>, mode: 'append' | 'replace'): Promise<{ dataset: DatasetInfo; loaded: number }>;
  /**
   * Replaces the rows and columns of several datasets of one organization all or nothing (a
   * recipe's outputs): `fill` writes each staging table, named within the organization's
   * namespace in the order of `targets` and created empty with the target's columns, in the
   * database (`Storage.writeGoverned`), and answers the rows it wrote to each; then every dataset
   * is swapped in one transaction (its version grows, `dataset.updated` is published), or none is.
   * A column flagged `pii` is PII in the dataset from then on.
   */
  replace(targets: { dataset: DatasetInfo; columns: (DataColumn & { pii?: boolean })[] }[], fill: (staging: string[]) => Promise<number[]>): Promise<{ dataset: DatasetInfo; rows: number }[]>;
  /**
   * A `column:operator:value` filter (the language of `GET …/rows`) as a condition on a table with
   * `columns`; an unknown column or operator or a value of the wrong type is a 400 naming `where`.
   */
  condition(columns: DataColumn[], filter: string, where: string): RawBuilder<boolean>;
  /** Turns a stored value back into its API value. */
  decode(type: DataColumnType, value: unknown): unknown;
  /**
   * A JSON value (as a JSON body of rows carries it) as a typed value for `load`; a value that does
   * not fit the type throws an Error saying why ("expected an integer, got \"abc\"").
   */
  parseValue(type: DataColumnType, value: unknown): unknown;
  /**
   * A text (a CSV field, a query parameter) as a typed value for a column of `type`: empty text is
   * null; a text that does not fit throws an Error saying why ("\"abc\" is not an integer").
   */
  parseText(type: DataColumnType, text: string): unknown;
  /**
   * A page of the dataset's rows as the caller may see them (PII masked, row policies applied):
   * the very path of `GET /api/datasets/{id}/rows`, with its 400, 403 and 404 problems. For API
   * Service lookups (spec §2.5). The caller's capability to read datasets is not checked here.
   */
  rows(principal: Principal, orgId: number, datasetId: number, query: RowsQuery): Promise<RowsPage>;
  /**
   * Every row of the dataset the caller may see, as `rows` shows them (row policies applied, PII
   * masked without `datasets.pii.read`, values decoded alike), in row order, every column, in pages
   * of `pageSize` rows (1 to `ROWS_STREAM_PAGE_MAX`, the default) read as long reads. Not bounded
   * in bytes per page as `rows` is: for platform code reading a whole dataset (a recipe handler's
   * inputs), not for answers to clients. A 404 problem for a dataset of another organization; the
   * caller's capability to read datasets is not checked here. Stop early with `return()`.
   */
  stream(principal: Principal, orgId: number, datasetId: number, options?: { pageSize?: number }): AsyncIterable<RowsBlock>;
  /**
   * Creates, unless it exists, a database index of the dataset's table on these columns (in this
   * order), for lookups by them; an unknown column is a 400 naming `columns.<i>`. On Postgres it is
   * built concurrently: writers go on, and a big table takes long. A load that replaces the table
   * loses it: call again on `dataset.updated`.
   */
  index(orgId: number, datasetId: number, columns: string[]): Promise<void>;
}

export const datasetCatalog = pluginServiceRef<DatasetCatalog>('datasets.catalog');

/** A schema contract of a dataset (spec §2.6): one version of its expected columns. */
export interface SchemaContract {
  id: number;
  dataset_id: number;
  version: number;
  columns: DataColumn[];
  is_current: boolean;
  created_by: number | null;
  created_at: string;
}

export type DriftStatus = 'ok' | 'additive' | 'breaking' | 'no-contract';

export interface DriftChange {
  column: string;
  change: 'added' | 'removed' | 'type_changed';
  from?: DataColumnType;
  to?: DataColumnType;
  severity: 'additive' | 'breaking';
}

/** The drift of a dataset's live schema from its current contract (spec §3.3). */
export interface SchemaDrift {
  status: DriftStatus;
  contract_version: number | null;
  dataset_version: number;
  changes: DriftChange[];
}

/**
 * Schema contracts and drift of an organization's datasets, as the `/contract` and `/drift` routes
 * answer them; for the pipeline step `check_schema_drift`. A dataset of another organization is a
 * 404 problem. Capabilities and auditing are the caller's business.
 */
export interface DatasetContracts {
  /** The current contract, or null while none was captured. */
  current(orgId: number, datasetId: number): Promise<SchemaContract | null>;
  /**
   * Captures the live schema as the new current contract (the previous one stays in the history);
   * `userId` is recorded as its author (null: none, e.g. a scheduled run). A 422 problem while the
   * dataset has no columns.
   */
  capture(orgId: number, datasetId: number, userId: number | null): Promise<SchemaContract>;
  /** Each change of the live schema from the current contract, classified, and the overall status. */
  drift(orgId: number, datasetId: number): Promise<SchemaDrift>;
}

export const datasetContracts = pluginServiceRef<DatasetContracts>('datasets.contracts');

/**
 * The durable event published in the transaction that deletes a dataset, so the plugins that keep
 * something about it (rules and their runs, cached profiles) drop it too: nothing of a deleted
 * dataset outlives it, even when such a plugin is reloading or failing at that moment (it gets
 * the event once it is back).
 */
export const DATASET_DELETED = 'datasets.deleted';
export interface DatasetDeletedEvent {
  dataset_id: number;
  name: string;
}

/**
 * The durable event published in the transaction that changes a dataset's rows (an upload, an
 * append, a recipe's output swapped in): `version` is the dataset's new version.
 */
export const DATASET_UPDATED = 'dataset.updated';
export interface DatasetUpdatedEvent {
  dataset_id: number;
  name: string;
  version: number;
  row_count: number;
  mode: 'append' | 'replace';
}

/**
 * The durable event a scenario's `check_schema_drift` step publishes for each dataset whose live
 * schema drifted from its current contract (additive or breaking), each change with its impact.
 */
export const SCHEMA_DRIFT_DETECTED = 'schema.drift.detected';
export interface SchemaDriftDetectedEvent {
  dataset_id: number;
  dataset: string;
  status: 'additive' | 'breaking';
  contract_version: number | null;
  changes: (DriftChange & { impact: unknown })[];
  run_id: number;
  scenario_id: number;
  /** The step's position in the scenario: a run's step that runs again (after a restart) finds the same drift. */
  step: number;
  /** The user the scenario's run acts for. */
  created_by: number;
}
