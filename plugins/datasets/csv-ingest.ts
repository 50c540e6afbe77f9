import { problems } from '../../kernel/plugin-api.ts';
import type { DataColumn } from '../../storage/index.ts';
import type { CsvBatch } from './csv-reader.ts';
import type { DatasetColumn } from './dataset-store.ts';
import { MAX_COLUMNS, validateColumnName } from './column-names.ts';
import { inferType, textParser, ValueError } from './values.ts';

/** Rows the types of an undeclared schema are inferred from (README: "Ingest"). */
export const INFER_SAMPLE_ROWS = 1000;
/** Rows stored together: fewer, larger writes, with memory still bounded. */
const BATCH_ROWS = 2000;

const badValue = (line: number, column: string, reason: string) =>
  problems.unprocessable(`line ${line}, column "${column}": ${reason}`, [{ path: 'body', message: `line ${line}, column "${column}": ${reason}` }]);

/** Records taken from the reader one at a time (the header, the inference sample), the rest left in place. */
class RecordCursor {
  private batch: CsvBatch = { records: [], lines: [] };
  private at = 0;

  constructor(private readonly batches: AsyncGenerator<CsvBatch>) {}

  async next(): Promise<{ fields: string[]; line: number } | undefined> {
    while (this.at >= this.batch.records.length) {
      const next = await this.batches.next();
      if (next.done) return undefined;
      this.batch = next.value;
      this.at = 0;
    }
    const at = this.at++;
    return { fields: this.batch.records[at], line: this.batch.lines[at] };
  }

  /** What is left of the current batch, then every later batch. */
  async *rest(): AsyncGenerator<CsvBatch> {
    if (this.at < this.batch.records.length) yield { records: this.batch.records.slice(this.at), lines: this.batch.lines.slice(this.at) };
    yield* this.batches;
  }
}

/**
 * Reads the header (and, without a declared schema, a sample to infer types from), then hands
 * back the columns and the typed rows in batches, still streaming. A value that does not fit its
 * column is a 422 naming the line and the column.
 */
export async function csvRows(
  batches: AsyncGenerator<CsvBatch>,
  declared: DatasetColumn[],
  mode: 'append' | 'replace',
): Promise<{ columns: DataColumn[]; batches: AsyncIterable<unknown[][]> }> {
  const cursor = new RecordCursor(batches);
  const first = await cursor.next();
  if (!first) throw problems.badRequest('the file is empty: a header line is expected', [{ path: 'body', message: 'no header line' }]);
  const header = first.fields.map((name) => name.trim());
  if (header.length > MAX_COLUMNS) throw problems.unprocessable(`the header has ${header.length} columns; a dataset has at most ${MAX_COLUMNS}`, [{ path: 'body', message: `line ${first.line}: too many columns` }]);
  const seen = new Set<string>();
  for (const name of header) {
    const reason = validateColumnName(name) ?? (seen.has(name.toLowerCase()) ? 'appears twice in the header' : null);
    if (reason) throw badValue(first.line, name, reason);
    seen.add(name.toLowerCase());
  }

  let columns: DataColumn[];
  const sample: CsvBatch = { records: [], lines: [] };
  const declaredType = (name: string) => declared.find((c) => c.name === name)?.type;
  if (mode === 'append' && declared.length) {
    const unknown = header.find((name) => declaredType(name) === undefined);
    if (unknown !== undefined) throw badValue(first.line, unknown, `is not a column of the dataset (its columns: ${declared.map((c) => c.name).join(', ')})`);
    columns = declared.map(({ name, type }) => ({ name, type }));
  } else {
    // The file defines the schema: known columns keep their declared type, new ones are inferred.
    if (header.some((name) => declaredType(name) === undefined)) {
      while (sample.records.length < INFER_SAMPLE_ROWS) {
        const record = await cursor.next();
        if (!record) break;
        sample.records.push(record.fields);
        sample.lines.push(record.line);
      }
    }
    columns = header.map((name, i) => ({ name, type: declaredType(name) ?? inferType(sample.records.map((r) => r[i])) }));
  }
  const toRows = rowConverter(columns, header);

  async function* typed(): AsyncIterable<unknown[][]> {
    let rows: unknown[][] = toRows(sample);
    for await (const batch of cursor.rest()) {
      for (const row of toRows(batch)) rows.push(row);
      if (rows.length >= BATCH_ROWS) {
        yield rows;
        rows = [];
      }
    }
    yield rows;
  }
  return { columns, batches: typed() };
}

/** Turns records into rows of the columns' types, in column order (a column the file lacks is null). */
function rowConverter(columns: DataColumn[], header: string[]): (batch: CsvBatch) => unknown[][] {
  const positions = columns.map((c) => header.indexOf(c.name));
  const parsers = columns.map((c) => textParser(c.type));
  const width = columns.length;
  return ({ records, lines }) => {
    const rows: unknown[][] = new Array(records.length);
    for (let r = 0; r < records.length; r += 1) {
      const fields = records[r];
      const row: unknown[] = new Array(width);
      let i = 0;
      try {
        for (; i < width; i += 1) row[i] = positions[i] === -1 ? null : parsers[i](fields[positions[i]]);
      } catch (err) {
        if (err instanceof ValueError) throw badValue(lines[r], columns[i].name, err.message);
        throw err;
      }
      rows[r] = row;
    }
    return rows;
  };
}
