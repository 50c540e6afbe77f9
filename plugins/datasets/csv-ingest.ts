import { problems } from '../../kernel/plugin-api.ts';
import type { DataColumn } from '../../storage/index.ts';
import type { CsvRecord } from './csv-reader.ts';
import type { DatasetColumn } from './dataset-store.ts';
import { validateColumnName } from './column-names.ts';
import { inferType, parseText, ValueError } from './values.ts';

/** Rows the types of an undeclared schema are inferred from (README: "Ingest"). */
export const INFER_SAMPLE_ROWS = 1000;
const BATCH_ROWS = 1000;

const badValue = (line: number, column: string, reason: string) =>
  problems.unprocessable(`line ${line}, column "${column}": ${reason}`, [{ path: 'body', message: `line ${line}, column "${column}": ${reason}` }]);

/**
 * Reads the header (and, without a declared schema, a sample to infer types from), then hands
 * back the columns and the typed rows in batches, still streaming. A value that does not fit its
 * column is a 422 naming the line and the column.
 */
export async function csvRows(
  records: AsyncGenerator<CsvRecord>,
  declared: DatasetColumn[],
  mode: 'append' | 'replace',
): Promise<{ columns: DataColumn[]; batches: AsyncIterable<unknown[][]> }> {
  const first = await records.next();
  if (first.done) throw problems.badRequest('the file is empty: a header line is expected', [{ path: 'body', message: 'no header line' }]);
  const header = first.value.fields.map((name) => name.trim());
  const seen = new Set<string>();
  for (const name of header) {
    const reason = validateColumnName(name) ?? (seen.has(name.toLowerCase()) ? 'appears twice in the header' : null);
    if (reason) throw badValue(1, name, reason);
    seen.add(name.toLowerCase());
  }

  let columns: DataColumn[];
  let sample: CsvRecord[] = [];
  const declaredType = (name: string) => declared.find((c) => c.name === name)?.type;
  if (mode === 'append' && declared.length) {
    const unknown = header.find((name) => declaredType(name) === undefined);
    if (unknown !== undefined) throw badValue(1, unknown, `is not a column of the dataset (its columns: ${declared.map((c) => c.name).join(', ')})`);
    columns = declared.map(({ name, type }) => ({ name, type }));
  } else {
    // The file defines the schema: known columns keep their declared type, new ones are inferred.
    if (header.some((name) => declaredType(name) === undefined)) {
      while (sample.length < INFER_SAMPLE_ROWS) {
        const next = await records.next();
        if (next.done) break;
        sample.push(next.value);
      }
    }
    columns = header.map((name, i) => ({ name, type: declaredType(name) ?? inferType(sample.map((r) => r.fields[i])) }));
  }
  const positions = columns.map((c) => header.indexOf(c.name));

  const toRow = (record: CsvRecord): unknown[] =>
    columns.map((column, i) => {
      const position = positions[i];
      if (position === -1) return null;
      try {
        return parseText(column.type, record.fields[position]);
      } catch (err) {
        if (err instanceof ValueError) throw badValue(record.line, column.name, err.message);
        throw err;
      }
    });

  async function* batches(): AsyncIterable<unknown[][]> {
    let batch: unknown[][] = sample.map(toRow);
    sample = [];
    for await (const record of records) {
      batch.push(toRow(record));
      if (batch.length >= BATCH_ROWS) {
        yield batch;
        batch = [];
      }
    }
    yield batch;
  }
  return { columns, batches: batches() };
}
