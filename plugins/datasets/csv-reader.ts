import { Transform, type Readable } from 'node:stream';
import Papa from 'papaparse';
import { HttpProblem, problems } from '../../kernel/plugin-api.ts';
import { FieldMeter, guessNewline, type CsvLimits, type Newline } from './csv-field-limit.ts';

/**
 * Decodes the upload as strict UTF-8 while counting bytes and lines: undecodable bytes are a 400
 * naming the line, more than `limitBytes` a 413, a field or record past `limits` a 422
 * (FieldMeter). Nothing is buffered beyond one chunk. `begin` learns the file's line break from the
 * first text, before that text is passed on.
 */
function strictUtf8(limitBytes: number, limits: CsvLimits, begin: (newline: Newline) => void): Transform {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let bytes = 0;
  let line = 1;
  let fields: FieldMeter | undefined;
  const decode = (chunk: Buffer | undefined, stream: boolean) => {
    try {
      return decoder.decode(chunk, { stream });
    } catch {
      const at = line + (chunk ? newlinesBeforeInvalid(chunk) : 0);
      throw problems.badRequest(`the file is not valid UTF-8 (line ${at})`, [{ path: 'body', message: `invalid UTF-8 at line ${at}` }]);
    }
  };
  return new Transform({
    readableObjectMode: false,
    transform(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      if (bytes > limitBytes) return done(new HttpProblem(413, `the upload is larger than the limit of ${limitBytes} bytes (DATASET_UPLOAD_LIMIT)`));
      try {
        const text = decode(chunk, true);
        if (!fields && text) {
          // A chunk without text holds no ASCII byte (a BOM, part of a character): nothing to measure yet.
          const newline = guessNewline(text);
          fields = new FieldMeter(limits, newline);
          begin(newline);
        }
        fields?.scan(chunk);
        for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) line += 1;
        done(null, text);
      } catch (err) {
        done(err as Error);
      }
    },
    flush(done) {
      try {
        const text = decode(undefined, false);
        if (!fields) begin('\n'); // an empty file: the parser still has to see it end
        done(null, text);
      } catch (err) {
        done(err as Error);
      }
    },
  });
}

/**
 * Newline bytes of `chunk` before its first undecodable byte (0x0A never occurs inside a multi-byte
 * character): the shortest prefix a fresh strict decoder refuses, found by bisection.
 */
function newlinesBeforeInvalid(chunk: Buffer): number {
  // Continuation bytes at the start complete a character begun in the previous chunk.
  let start = 0;
  while (start < Math.min(3, chunk.length) && (chunk[start] & 0xc0) === 0x80) start += 1;
  const refused = (end: number) => {
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(chunk.subarray(start, end), { stream: true });
      return false;
    } catch {
      return true;
    }
  };
  if (!refused(chunk.length)) return 0; // the fault is where the previous chunk ended
  let low = start;
  let high = chunk.length;
  while (low + 1 < high) {
    const middle = (low + high) >>> 1;
    if (refused(middle)) high = middle;
    else low = middle;
  }
  let count = 0;
  for (let i = 0; i < high - 1; i += 1) if (chunk[i] === 0x0a) count += 1;
  return count;
}

/** Records of one parsed stretch of the file, each with the 1-based line of the file it starts on. */
export interface CsvBatch {
  records: string[][];
  lines: number[];
}

const malformed = (line: number, reason: string) => problems.badRequest(`malformed CSV at line ${line}: ${reason}`, [{ path: 'body', message: `line ${line}: ${reason}` }]);

/** papaparse's reasons, said the way a person fixing the file needs them. */
const QUOTE_ERRORS: Record<string, string> = {
  MissingQuotes: 'a quoted field is never closed',
  InvalidQuotes: 'a closing quote is followed by something other than a comma or the end of the line',
};

/**
 * Streams CSV records in batches with their line numbers (papaparse: RFC 4180 quoting, a leading
 * BOM dropped by the decoder, empty lines skipped, a quote inside an unquoted field taken as text,
 * as Excel and Python's csv module do). Ragged rows and bad quoting are a 400 naming the line.
 * The parser pauses the upload while a batch is being stored, so memory does not follow file size.
 */
export async function* readCsv(source: Readable, limitBytes: number, limits: CsvLimits): AsyncGenerator<CsvBatch> {
  // The upload's own failure (a multipart form without its closing boundary, a client gone): a 400 about the body.
  const unreadable = (err: Error) => problems.badRequest(`the request body could not be read to its end: ${err.message}`, [{ path: 'body', message: err.message }]);
  if (source.errored) throw unreadable(source.errored);
  const decoded = source.pipe(strictUtf8(limitBytes, limits, (newline) => parse(newline)));
  source.on('error', (err) => decoded.destroy(unreadable(err)));
  const queue: (CsvBatch | Error)[] = [];
  let finished = false;
  let wake: (() => void) | null = null;
  let parser: Papa.Parser | undefined;
  const arrive = (item?: CsvBatch | Error) => {
    if (item) queue.push(item);
    wake?.();
    wake = null;
  };
  decoded.on('error', (err) => arrive(err)); // also before the parser starts
  const lines = new LineCounter();
  // Started once the first text tells the line break, so that papaparse and the FieldMeter split records alike.
  const parse = (newline: Newline) => Papa.parse<string[]>(decoded as unknown as NodeJS.ReadableStream, {
    delimiter: ',',
    quoteChar: '"',
    newline,
    skipEmptyLines: false, // counted, then skipped, by LineCounter: line numbers must stay right
    chunk: (results, handle) => {
      // Until the batch is taken: the handle stops parsing, the stream stops reading (papaparse
      // would otherwise queue what keeps arriving).
      parser = handle;
      handle.pause();
      decoded.pause();
      try {
        arrive(lines.take(results.data, results.errors));
      } catch (err) {
        arrive(err as Error);
      }
    },
    complete: () => {
      finished = true;
      arrive();
    },
    error: (err: Error) => arrive(err), // the parser's own failures; the stream's arrive once more, harmlessly
  });
  try {
    for (;;) {
      const item = queue.shift();
      if (item instanceof Error) throw item;
      if (item) {
        if (item.records.length > 0) yield item;
        decoded.resume();
        parser?.resume();
        continue;
      }
      if (finished) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    parser?.abort();
    source.unpipe();
    drain(source, limitBytes);
  }
}

/**
 * Gives each record the line it starts on and checks it against the header's field count. A
 * record spans one line plus the line breaks inside its quoted fields.
 */
class LineCounter {
  private next = 1;
  private width = -1;

  take(records: string[][], errors: Papa.ParseError[]): CsvBatch {
    // An error on a row past the returned ones is about the unfinished last row, parsed again with the next chunk.
    const failed = errors.find((e) => e.row !== undefined && e.row < records.length);
    const kept: string[][] = [];
    const lines: number[] = [];
    for (let i = 0; i < records.length; i += 1) {
      const record = records[i];
      const line = this.next;
      this.next += 1 + lineBreaksIn(record);
      if (failed?.row === i) throw malformed(line, QUOTE_ERRORS[failed.code] ?? failed.message);
      if (record.length === 1 && record[0] === '') continue; // an empty line
      if (this.width === -1) this.width = record.length;
      else if (record.length !== this.width) throw malformed(line, `${record.length} fields where the header has ${this.width}`);
      kept.push(record);
      lines.push(line);
    }
    return { records: kept, lines };
  }
}

function lineBreaksIn(record: string[]): number {
  let count = 0;
  for (const field of record) for (let at = field.indexOf('\n'); at !== -1; at = field.indexOf('\n', at + 1)) count += 1;
  return count;
}

/**
 * Reads away what is left of a body the upload stopped reading, so a client that sends its whole
 * body before reading the answer gets it on the same connection; one that goes on sending past the
 * upload limit (`limitBytes`, as much as an upload may be) has its connection closed rather than be
 * read for ever.
 */
function drain(source: Readable, limitBytes: number): void {
  let drained = 0;
  source.on('data', (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > limitBytes) source.destroy();
  });
  source.resume();
}
