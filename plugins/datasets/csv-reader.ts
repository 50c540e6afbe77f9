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
      throw problems.badRequest(`the file is not valid UTF-8 (line ${line})`, [{ path: 'body', message: `invalid UTF-8 at line ${line}` }]);
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
