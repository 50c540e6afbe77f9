import { Readable } from 'node:stream';
import { stringify } from 'csv-stringify/sync';
import type { Storage } from '../../storage/index.ts';
import type { Dataset } from './dataset-store.ts';
import { allRows, type Visibility } from './rows-query.ts';

/** Text a spreadsheet would run as a formula (OWASP's CSV injection list: = + - @ tab CR), given a leading `'`. */
const FORMULA_START = /^[=+\-@\t\r]/;
const inert = (text: string) => (FORMULA_START.test(text) ? `'${text}` : text);

/** A cell of the CSV export: text cells (strings, column names) neutralised, never numbers (-3 stays -3). */
const csvValue = (value: unknown) =>
  value === null || value === undefined ? '' : typeof value === 'string' ? inert(value) : typeof value === 'object' ? JSON.stringify(value) : String(value);

/**
 * The whole dataset as CSV (header first) or as a JSON array, streamed page by page: memory holds
 * one page, whatever the size of the dataset. CSV text cells that begin like a formula get a
 * leading `'` (a JSON export carries the values as they are).
 */
export function exportStream(storage: Storage, dataset: Dataset, format: 'csv' | 'json', visibility: Visibility, maxPageBytes: number): Readable {
  async function* csv() {
    yield stringify([dataset.columns.map((c) => inert(c.name))]);
    for await (const page of allRows(storage, dataset, visibility, maxPageBytes)) {
      if (page.rows.length) yield stringify(page.rows.map((row) => page.columns.map((c) => csvValue(row[c.name]))));
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
