import { Readable } from 'node:stream';
import { csvLines } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { Dataset } from './dataset-store.ts';
import { allRows, type Visibility } from './rows-query.ts';

/**
 * The whole dataset as CSV (header first) or as a JSON array, streamed page by page: memory holds
 * one page, whatever the size of the dataset. CSV text cells that begin like a formula get a
 * leading `'` (a JSON export carries the values as they are).
 */
export function exportStream(storage: Storage, dataset: Dataset, format: 'csv' | 'json', visibility: Visibility, maxPageBytes: number): Readable {
  async function* csv() {
    yield csvLines([dataset.columns.map((c) => c.name)]);
    for await (const page of allRows(storage, dataset, visibility, maxPageBytes)) {
      if (page.rows.length) yield csvLines(page.rows.map((row) => page.columns.map((c) => row[c.name])));
    }
  }
  async function* json() {
    yield '[';
    let first = true;
    for await (const page of allRows(storage, dataset, visibility, maxPageBytes)) {
      for (const row of page.rows) {
        yield `${first ? '' : ','}\n${JSON.stringify(row)}`;
        first = false;
      }
    }
    yield '\n]\n';
  }
  return Readable.from(format === 'csv' ? csv() : json());
}
