import { Readable } from 'node:stream';
import { stringify } from 'csv-stringify/sync';
import type { Storage } from '../../storage/index.ts';
import type { Dataset } from './dataset-store.ts';
import { allRows, type Visibility } from './rows-query.ts';

const csvValue = (value: unknown) => (value === null || value === undefined ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value));

/**
 * The whole dataset as CSV (header first) or as a JSON array, streamed page by page: memory holds
 * one page, whatever the size of the dataset.
 */
export function exportStream(storage: Storage, dataset: Dataset, format: 'csv' | 'json', visibility: Visibility): Readable {
  async function* csv() {
    yield stringify([dataset.columns.map((c) => c.name)]);
    for await (const page of allRows(storage, dataset, visibility)) {
      if (page.rows.length) yield stringify(page.rows.map((row) => page.columns.map((c) => csvValue(row[c.name]))));
    }
  }
  async function* json() {
    yield '[';
    let first = true;
    for await (const page of allRows(storage, dataset, visibility)) {
      for (const row of page.rows) {
        yield `${first ? '' : ','}\n${JSON.stringify(row)}`;
        first = false;
      }
    }
    yield '\n]\n';
  }
  return Readable.from(format === 'csv' ? csv() : json());
}
