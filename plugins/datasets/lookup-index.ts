import crypto from 'node:crypto';
import type { Storage } from '../../storage/index.ts';
import type { Dataset } from './dataset-store.ts';
import { columnLookup } from './filters.ts';

/**
 * Creates, unless it exists, an index of the dataset's table on `columns` (in that order), for
 * lookups by them (API Service lookups), without blocking the table's writers where the database
 * can (see DataTables.index). Named after the table and the columns: a load that replaces the
 * table drops its indexes with it, so its owner creates it again on `dataset.updated`.
 */
export async function indexColumns(storage: Storage, dataset: Dataset, columns: string[]): Promise<void> {
  const column = columnLookup(dataset.columns);
  const names = columns.map((name, i) => column(name, `columns.${i}`).name);
  const digest = crypto.createHash('sha256').update(JSON.stringify([dataset.table_name, names])).digest('hex').slice(0, 20);
  await storage.dataTables.index(storage.db, dataset.org_id, dataset.table_name, `ix_${dataset.org_id}_${digest}`, names);
}
