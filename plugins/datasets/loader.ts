import crypto from 'node:crypto';
import { sql, type Transaction } from 'kysely';
import { ROW_ID, type DataColumn, type Storage } from '../../storage/index.ts';
import type { Dataset, DatasetColumn, DatasetStore } from './dataset-store.ts';

export type LoadMode = 'append' | 'replace';

/** A staging table is its dataset's table name, this suffix and 8 hex digits. */
const STAGING_SUFFIX = '_load_';
const STAGING_TABLE = /^.+_load_[0-9a-f]{8}$/;

/** The new columns, keeping the PII flag and description of those the dataset already had. */
function withMetadata(columns: DataColumn[], previous: DatasetColumn[]): DatasetColumn[] {
  return columns.map((c) => {
    const known = previous.find((p) => p.name === c.name);
    return { name: c.name, type: c.type, pii: known?.pii ?? false, description: known?.description ?? null };
  });
}

/**
 * Loads rows into a dataset all-or-nothing. Rows go to a staging table first, so a failure at
 * any row leaves the dataset exactly as it was and other requests keep being served while a big
 * file loads; one short transaction then appends the staged rows or swaps the staging table in.
 */
export class DatasetLoader {
  constructor(
    private readonly storage: Storage,
    private readonly store: DatasetStore,
  ) {}

  async load(dataset: Dataset, columns: DataColumn[], batches: AsyncIterable<unknown[][]> | Iterable<unknown[][]>, mode: LoadMode): Promise<{ dataset: Dataset; loaded: number }> {
    const staging = `${dataset.table_name}${STAGING_SUFFIX}${crypto.randomBytes(4).toString('hex')}`;
    // Claimed for the load's whole life: another instance starting meanwhile does not take it for an orphan.
    const release = await this.storage.dataTables.claim(dataset.org_id, staging);
    try {
      return await this.loadThrough(staging, dataset, columns, batches, mode);
    } finally {
      await release();
    }
  }

  /**
   * Drops the staging tables no load claims: those of a process killed mid-load (at start-up; on
   * Postgres a live load of another instance keeps its own). Answers their names.
   */
  dropAbandoned(): Promise<string[]> {
    return this.storage.dataTables.dropUnclaimed(this.storage.db, (table) => STAGING_TABLE.test(table));
  }

  private async loadThrough(staging: string, dataset: Dataset, columns: DataColumn[], batches: AsyncIterable<unknown[][]> | Iterable<unknown[][]>, mode: LoadMode) {
    const { dataTables, db } = this.storage;
    const orgId = dataset.org_id;
    await dataTables.create(db, orgId, staging, columns);
    let loaded = 0;
    try {
      const writer = await dataTables.openWriter(db, orgId, staging, columns);
      try {
        for await (const batch of batches) {
          if (batch.length === 0) continue;
          await writer.write(batch);
          loaded += batch.length;
        }
        await writer.end();
      } catch (err) {
        await writer.abort();
        throw err;
      }
      // A dataset without columns yet takes the staged table whole, whatever the mode.
      const swap = mode === 'replace' || dataset.columns.length === 0;
      await this.storage.transaction(async (trx) => {
        // Descriptions and PII flags as they are now: someone may have changed them while the file loaded.
        const current = swap ? await this.currentColumns(trx, dataset.id) : [];
        if (swap) {
          await dataTables.drop(trx, orgId, dataset.table_name);
          await dataTables.rename(trx, orgId, staging, dataset.table_name);
        } else {
          const names = sql.join(columns.map((c) => sql.id(c.name)));
          await sql`insert into ${dataTables.ref(orgId, dataset.table_name)} (${names}) select ${names} from ${dataTables.ref(orgId, staging)} order by ${sql.id(ROW_ID)}`.execute(trx);
          await dataTables.drop(trx, orgId, staging);
        }
        await trx
          .updateTable('datasets')
          .set({
            row_count: swap ? loaded : sql`row_count + ${loaded}`,
            version: sql`version + 1`,
            ...(swap ? { columns: this.storage.encodeJson(withMetadata(columns, current)) } : {}),
            updated_at: this.storage.now(),
          })
          .where('id', '=', dataset.id)
          .execute();
      });
    } catch (err) {
      await dataTables.drop(db, orgId, staging).catch(() => undefined);
      throw err;
    }
    return { dataset: await this.store.get(orgId, dataset.id), loaded };
  }

  private async currentColumns(trx: Transaction<any>, datasetId: number): Promise<DatasetColumn[]> {
    const row = await trx.selectFrom('datasets').select('columns').where('id', '=', datasetId).executeTakeFirstOrThrow();
    return this.storage.decodeJson<DatasetColumn[]>(row.columns) ?? [];
  }
}
