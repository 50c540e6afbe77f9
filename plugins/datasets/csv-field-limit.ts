import Papa from 'papaparse';
import { problems } from '../../kernel/plugin-api.ts';

/** The line break papaparse splits records on. */
export type Newline = '\n' | '\r\n' | '\r';

/** papaparse's own guess, exported on `Papa` but not in its type declarations. */
const { ParserHandle } = Papa as unknown as { ParserHandle: new (config: object) => { guessLineEndings(input: string, quoteChar: string): Newline } };

/**
 * The line break of a file, guessed from its first text as papaparse guesses it; the reader hands
 * it to papaparse, so that the parser and the FieldMeter split records alike.
 */
export const guessNewline = (text: string): Newline => new ParserHandle({}).guessLineEndings(text, '"');

const QUOTE = 0x22;
const COMMA = 0x2c;
const LF = 0x0a;
const CR = 0x0d;
const SPACE = 0x20;
const BOM = [0xef, 0xbb, 0xbf];

// Where the meter is in the current field, with papaparse's rules: a field is quoted only when its
// first byte is a quote; inside, `""` is a quote; a closing quote ends the field only before a
// comma or a line break (spaces between allowed), else the field goes on.
const START = 0; // before the field's first byte
const UNQUOTED = 1;
const QUOTED = 2;
const CLOSING = 3; // a quote inside a quoted field: escaped, closing, or stray
const SPACES = 4; // spaces after a closing quote

/** Largest field and record of an uploaded CSV, in bytes as written in the file. */
export interface CsvLimits {
  /** CSV_MAX_FIELD_BYTES */
  field: number;
  /** CSV_MAX_RECORD_BYTES */
  record: number;
}

/**
 * Measures each field and record of a CSV byte stream as it arrives, before papaparse (which holds
 * a whole record in memory, and re-reads it with every chunk until it ends) sees it: a field or a
 * record longer than its limit, as written in the file (quotes and commas included), or a quoted
 * field that is never closed, is refused as soon as it passes the limit. Lines are counted as the
 * reader counts them: a record starts a line, a line feed inside a field starts another.
 */
export class FieldMeter {
  private state = START;
  private length = 0;
  private field = 1;
  private fieldLine = 1;
  private line = 1;
  /** `\r\n` files: a carriage return that a line feed may follow. */
  private pendingCr = false;
  private bom = 0;
  private record = 0;
  private recordLine = 1;

  constructor(
    private readonly limits: CsvLimits,
    private readonly newline: Newline,
  ) {}

  /** Throws a 422 naming the line where the field starts and the limit. */
  scan(chunk: Buffer): void {
    let i = 0;
    // The decoder drops a leading BOM: so does the meter.
    while (this.bom < BOM.length && i < chunk.length) {
      if (chunk[i] !== BOM[this.bom]) this.bom = BOM.length;
      else (this.bom += 1), (i += 1);
    }
    const breakByte = this.newline === '\n' ? LF : CR;
    const crlf = this.newline === '\r\n';
    const max = this.limits.field;
    const maxRecord = this.limits.record;
    // The hot loop works on locals (written back at the end, or before a refusal reads them).
    let { state, length, field, fieldLine, line, pendingCr, record, recordLine } = this;
    const n = chunk.length;
    for (; i < n; i += 1) {
      let byte = chunk[i];
      record += 1;
      if (pendingCr) {
        pendingCr = false;
        if (byte === LF) {
          state = START;
          length = 0;
          field = 1;
          line += 1;
          record = 0;
          recordLine = line;
          continue;
        }
        byte = CR; // a carriage return alone is text: measure it, then this byte again
        i -= 1;
      } else if (state !== QUOTED) {
        if (byte === COMMA) {
          state = START;
          length = 0;
          field += 1;
          continue;
        }
        if (byte === breakByte) {
          if (crlf) pendingCr = true;
          else {
            state = START;
            length = 0;
            field = 1;
            line += 1; // a `\n` or a `\r` line break alike
            record = 0;
            recordLine = line;
          }
          continue;
        }
      }
      switch (state) {
        case START:
          state = byte === QUOTE ? QUOTED : UNQUOTED;
          fieldLine = line;
          break;
        case QUOTED:
          if (byte === QUOTE) state = CLOSING;
          break;
        case CLOSING:
          state = byte === SPACE ? SPACES : QUOTED; // `""` is a quote; anything else, a stray quote papaparse reads past
          break;
        case SPACES:
          if (byte !== SPACE) state = byte === QUOTE ? CLOSING : QUOTED;
          break;
      }
      if (byte === LF) line += 1;
      if (++length > max) {
        Object.assign(this, { state, field, fieldLine });
        this.refuse();
      }
      if (record > maxRecord) {
        const what = `line ${recordLine}: a record longer than the limit of ${maxRecord} bytes (CSV_MAX_RECORD_BYTES)`;
        throw problems.unprocessable(what, [{ path: 'body', message: what }]);
      }
    }
    Object.assign(this, { state, length, field, fieldLine, line, pendingCr, record, recordLine });
  }

  private refuse(): never {
    const what = `line ${this.fieldLine}, field ${this.field}: longer than the limit of ${this.limits.field} bytes (CSV_MAX_FIELD_BYTES)`;
    const hint = this.state === UNQUOTED ? '' : '; it is a quoted field: if its closing quote is missing, the rest of the file reads as this one field';
    throw problems.unprocessable(`${what}${hint}`, [{ path: 'body', message: what }]);
  }
}
