/** The sql plugin's public contract: the governed query path, for plugins that depend on it. */
import { pluginServiceRef, type Principal, type RequestAudit } from '../../kernel/plugin-api.ts';
import type { DataColumn } from '../../storage/index.ts';
import type { DatasetInfo } from '../datasets/public.ts';

export interface GovernedQuery {
  sql: string;
  params?: unknown[];
  limit?: number;
  timeout_ms?: number;
  /**
   * The PII columns (by name, in any dataset read) the caller's `datasets.pii.read` unmasks; every
   * other PII column reads masked whatever the caller holds. Absent: the caller's rights alone.
   */
  unmasked?: readonly string[];
}

export interface GovernedResult {
  columns: { name: string; type: string }[];
  rows: unknown[][];
  row_count: number;
  truncated: boolean;
  /** Which bound left rows out: `limit` rows, or SQL_MAX_RESULT_BYTES of values. */
  truncated_reason: 'row_limit' | 'byte_limit' | null;
  elapsed_ms: number;
}

export interface GovernedSql {
  /**
   * Runs a query exactly as `POST /api/sql` would for this caller: same checks, masking, row
   * policies, limits and audit (recorded through the caller's request `audit`); refusals are the
   * same problems.
   */
  run(query: GovernedQuery, orgId: number, principal: Principal, audit: RequestAudit): Promise<GovernedResult>;
  /**
   * The result columns of a query, without reading a row: the statement checked as `run` checks it
   * (same refusals), each `$n` bound to `params`. With `unmasked`, the PII columns outside it are
   * described as they read masked (text); without, nothing is masked.
   */
  describe(query: Pick<GovernedQuery, 'sql' | 'params' | 'timeout_ms' | 'unmasked'>, orgId: number): Promise<DataColumn[]>;
  /**
   * The datasets a query reads, as they are now (their versions: for caches keyed by the data),
   * the statement checked as `run` checks it (same refusals).
   */
  reads(query: Pick<GovernedQuery, 'sql'>, orgId: number): Promise<DatasetInfo[]>;
}

export const governedSql = pluginServiceRef<GovernedSql>('sql.governed');

/**
 * The title of the 400 for what the database refused while running a statement (a division by
 * zero, a negative LIMIT), as opposed to a statement refused before it ran (not one SELECT, no such
 * dataset): the first depends on the values bound, the second on the text alone.
 */
export const QUERY_REJECTED = 'Query rejected by the database';

/** The title of the 422 for a statement stopped at its timeout (running, or waiting for one of the organization's query slots). */
export const QUERY_TIMED_OUT = 'Query timed out';
