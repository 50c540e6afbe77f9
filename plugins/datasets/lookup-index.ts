import crypto from 'node:crypto';
import { sql } from 'kysely';
import type { Storage } from '../../storage/index.ts';
import type { Dataset } from './dataset-store.ts';
import { columnLookup } from './filters.ts';

/**
 * Creates, unless it exists, an index of the dataset's table on `columns` (in that order), for
 * lookups by them (API Service lookups). Named after the table and the columns: a load that
 * replaces the table drops its indexes with it, and the next call creates the index anew.
 */
export async function indexColumns(storage: Storage, dataset: Dataset, columns: string[]): Promise<void> {
  const column = columnLookup(dataset.columns);
  const names = columns.map((name, i) => column(name, `columns.${i}`).name);
  const digest = crypto.createHash('sha256').update(JSON.stringify([dataset.table_name, names])).digest('hex').slice(0, 20);
  const index = `ix_${dataset.org_id}_${digest}`;
  await sql`create index if not exists ${sql.id(index)} on ${storage.dataTables.ref(dataset.org_id, dataset.table_name)} (${sql.join(names.map((name) => sql.id(name)))})`.execute(storage.db);
}
