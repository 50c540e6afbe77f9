import crypto from 'node:crypto';
import { sql, type Transaction } from 'kysely';
import { ROW_ID, type DataColumn, type Storage } from '../../storage/index.ts';
import type { DomainEvents } from '../../kernel/plugin-api.ts';
import type { Dataset, DatasetColumn, DatasetStore } from './dataset-store.ts';
import { DATASET_UPDATED, type DatasetUpdatedEvent } from './public.ts';

export type LoadMode = 'append' | 'replace';

/**
 * A staging table is its dataset's table name, this suffix and 8 hex digits; so is a table whose
 * rows a swap replaced, until it is dropped (one a crash left behind is dropped as abandoned).
 */
const STAGING_SUFFIX = '_load_';
const STAGING_TABLE = /^.+_load_[0-9a-f]{8}$/;
const stagingName = (table: string) => `${table}${STAGING_SUFFIX}${crypto.randomBytes(4).toString('hex')}`;

/**
 * The new columns, keeping the PII flag and description of those the dataset already had; a column
 * the writer flags PII (a recipe's column computed from one) is PII whatever it was.
 */
function withMetadata(columns: StagedTarget['columns'], previous: DatasetColumn[]): DatasetColumn[] {
  return columns.map((c) => {
    const known = previous.find((p) => p.name === c.name);
    return { name: c.name, type: c.type, pii: Boolean(c.pii) || (known?.pii ?? false), description: known?.description ?? null };
  });
}

/** Whether a load's staging table becomes the dataset's table (else its rows are appended): a dataset without columns yet takes it whole, whatever the mode. */
const swapsIn = (dataset: Dataset, mode: LoadMode) => mode === 'replace' || dataset.columns.length === 0;

/** One dataset a staged change replaces (or appends to): its new columns, each may be flagged PII. */
export interface StagedTarget {
  dataset: Dataset;
  columns: (DataColumn & { pii?: boolean })[];
}

/**
 * Loads rows into datasets all-or-nothing. Rows go to a staging table per dataset first, so a
 * failure at any row leaves every dataset exactly as it was and other requests keep being served
 * while a big file loads (or a recipe computes); one short transaction then appends the staged rows
 * or swaps the staging tables in, and publishes `dataset.updated` for each.
 */
export class DatasetLoader {
  constructor(
    private readonly storage: Storage,
    private readonly store: DatasetStore,
    private readonly events: DomainEvents,
  ) {}

  /** Writes typed row batches into one dataset (an upload, a plugin recipe's output). */
  async load(dataset: Dataset, columns: StagedTarget['columns'], batches: AsyncIterable<unknown[][]> | Iterable<unknown[][]>, mode: LoadMode): Promise<{ dataset: Dataset; loaded: number }> {
    const [result] = await this.staged([{ dataset, columns }], mode, async ([staging]) => [await this.writeBatches(dataset.org_id, staging, columns, batches)]);
    return { dataset: result.dataset, loaded: result.rows };
  }

  /**
   * Replaces several datasets of one organization at once: `fill` writes each staging table (in
   * the order of `targets`, created empty with the target's columns) in the database and answers
   * the rows it wrote to each; then every dataset is swapped in one transaction, or none is.
   */
  async replace(targets: StagedTarget[], fill: (staging: string[]) => Promise<number[]>): Promise<{ dataset: Dataset; rows: number }[]> {
    return this.staged(targets, 'replace', fill);
  }

  /**
   * Drops the staging tables no load claims: those of a process killed mid-load (at start-up; on
   * Postgres a live load of another instance keeps its own). Answers their names.
   */
  dropAbandoned(): Promise<string[]> {
    return this.storage.dataTables.dropUnclaimed(this.storage.db, (table) => STAGING_TABLE.test(table));
  }

  private async writeBatches(orgId: number, staging: string, columns: DataColumn[], batches: AsyncIterable<unknown[][]> | Iterable<unknown[][]>): Promise<number> {
    const writer = await this.storage.dataTables.openWriter(this.storage.db, orgId, staging, columns);
    let loaded = 0;
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
    return loaded;
  }

  private async staged(targets: StagedTarget[], mode: LoadMode, fill: (staging: string[]) => Promise<number[]>): Promise<{ dataset: Dataset; rows: number }[]> {
    const { dataTables, db } = this.storage;
    const staging = targets.map(({ dataset }) => stagingName(dataset.table_name));
    // Claimed for the load's whole life: another instance starting meanwhile does not take them for orphans.
    const releases = await Promise.all(targets.map(({ dataset }, i) => dataTables.claim(dataset.org_id, staging[i])));
    try {
      for (const [i, { dataset, columns }] of targets.entries()) await dataTables.create(db, dataset.org_id, staging[i], columns);
      const rows = await fill(staging);
      // A table swapped in is queried at once: its statistics first, while nothing else sees it (an
      // ANALYZE racing a later change of the live table's catalog rows can fail either).
      for (const [i, { dataset }] of targets.entries()) if (swapsIn(dataset, mode)) await dataTables.analyze(db, dataset.org_id, staging[i]);
      const unused = await this.storage.transaction(async (trx) => {
        const tables: string[] = [];
        for (const [i, target] of targets.entries()) tables.push(await this.swapIn(trx, target, staging[i], rows[i], mode));
        return tables;
      });
      // Dropped once committed, outside the transaction (see DataTables.discard); one that fails is dropped as abandoned at the next start.
      for (const [i, table] of unused.entries()) await dataTables.discard(db, targets[i].dataset.org_id, table).catch(() => undefined);
      return await Promise.all(targets.map(async ({ dataset }, i) => ({ dataset: await this.store.get(dataset.org_id, dataset.id), rows: rows[i] })));
    } catch (err) {
      await Promise.all(targets.map(({ dataset }, i) => dataTables.drop(db, dataset.org_id, staging[i]).catch(() => undefined)));
      throw err;
    } finally {
      await Promise.all(releases.map((release) => release()));
    }
  }

  /** Swaps or appends the staged rows in; answers the table left unused (the replaced one, or the appended staging table). */
  private async swapIn(trx: Transaction<any>, { dataset, columns }: StagedTarget, staging: string, loaded: number, mode: LoadMode): Promise<string> {
    const { dataTables } = this.storage;
    const orgId = dataset.org_id;
    const swap = swapsIn(dataset, mode);
    // Descriptions and PII flags as they are now: someone may have changed them while the rows were staged.
    const current = swap ? await this.currentColumns(trx, dataset.id) : [];
    let unused = staging;
    if (swap) {
      // Renamed aside rather than dropped here: dropping a big table is slow on SQLite.
      unused = stagingName(dataset.table_name);
      await dataTables.rename(trx, orgId, dataset.table_name, unused);
      await dataTables.rename(trx, orgId, staging, dataset.table_name);
    } else {
      const names = sql.join(columns.map((c) => sql.id(c.name)));
      await sql`insert into ${dataTables.ref(orgId, dataset.table_name)} (${names}) select ${names} from ${dataTables.ref(orgId, staging)} order by ${sql.id(ROW_ID)}`.execute(trx);
    }
    const updated = await trx
      .updateTable('datasets')
      .set({
        row_count: swap ? loaded : sql`row_count + ${loaded}`,
        version: sql`version + 1`,
        ...(swap ? { columns: this.storage.encodeJson(withMetadata(columns, current)) } : {}),
        updated_at: this.storage.now(),
      })
      .where('id', '=', dataset.id)
      .returning(['version', 'row_count'])
      .executeTakeFirstOrThrow();
    const payload: DatasetUpdatedEvent = { dataset_id: dataset.id, name: dataset.name, version: Number(updated.version), row_count: Number(updated.row_count), mode };
    await this.events.publish({ type: DATASET_UPDATED, orgId, payload }, trx);
    return unused;
  }

  private async currentColumns(trx: Transaction<any>, datasetId: number): Promise<DatasetColumn[]> {
    const row = await trx.selectFrom('datasets').select('columns').where('id', '=', datasetId).executeTakeFirstOrThrow();
    return this.storage.decodeJson<DatasetColumn[]>(row.columns) ?? [];
  }
}
