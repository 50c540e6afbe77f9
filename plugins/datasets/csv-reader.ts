import { Transform, type Readable } from 'node:stream';
import { CsvError, parse } from 'csv-parse';
import { HttpProblem, problems } from '../../kernel/plugin-api.ts';

export interface CsvRecord {
  /** 1-based line of the file where the record starts. */
  line: number;
  fields: string[];
}

/**
 * Decodes the upload as strict UTF-8 while counting bytes and lines: undecodable bytes are a 400
 * naming the line, more than `limitBytes` a 413. Nothing is buffered beyond one chunk.
 */
function strictUtf8(limitBytes: number): Transform {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let bytes = 0;
  let line = 1;
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
        for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) line += 1;
        done(null, text);
      } catch (err) {
        done(err as Error);
      }
    },
    flush(done) {
      try {
        done(null, decode(undefined, false));
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

/**
 * Streams CSV records with their line numbers (csv-parse: RFC 4180 quoting, a leading BOM dropped,
 * empty lines skipped). Ragged rows and bad quoting are a 400 naming the line.
 */
export async function* readCsv(source: Readable, limitBytes: number): AsyncGenerator<CsvRecord> {
  const parser = parse({ bom: true, skip_empty_lines: true, relax_column_count: false, info: true });
  const decoded = source.pipe(strictUtf8(limitBytes));
  decoded.on('error', (err) => parser.destroy(err));
  source.on('error', (err) => parser.destroy(err));
  decoded.pipe(parser);
  try {
    for await (const { record, info } of parser as AsyncIterable<{ record: string[]; info: { lines: number } }>) {
      yield { line: info.lines, fields: record };
    }
  } catch (err) {
    if (err instanceof CsvError) {
      const line = (err as CsvError & { lines?: number }).lines;
      throw problems.badRequest(`malformed CSV${line ? ` at line ${line}` : ''}: ${err.message}`, [{ path: 'body', message: `line ${line ?? '?'}: ${err.message}` }]);
    }
    throw err;
  } finally {
    source.unpipe();
    source.resume(); // drain what is left so the connection can answer
  }
}
