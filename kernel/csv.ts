import { stringify } from 'csv-stringify/sync';

/** Text a spreadsheet would run as a formula (OWASP's CSV injection list: = + - @ tab CR), given a leading `'`. */
const FORMULA_START = /^[=+\-@\t\r]/;
const inert = (text: string) => (FORMULA_START.test(text) ? `'${text}` : text);

/** A cell of a CSV export: text cells neutralised, never numbers (-3 stays -3); JSON values as JSON text. */
const csvValue = (value: unknown) =>
  value === null || value === undefined ? '' : typeof value === 'string' ? inert(value) : typeof value === 'object' ? JSON.stringify(value) : String(value);

/**
 * Rows as CSV lines (RFC 4180 quoting), every text cell that begins like a formula given a leading
 * `'` so that a spreadsheet shows it as text: what every CSV export of the platform answers.
 */
export function csvLines(rows: unknown[][]): string {
  return stringify(rows.map((row) => row.map(csvValue)));
}
