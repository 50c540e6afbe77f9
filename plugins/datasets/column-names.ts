import { ROW_ID } from '../../storage/index.ts';

/**
 * Columns a dataset may have, declared or from a file's header: well inside Postgres's 1600 and
 * SQLite's 2000, with room for a row to fit a Postgres page when most values are short or empty.
 */
export const MAX_COLUMNS = 1000;

/** Postgres truncates identifiers past 63 bytes; names are kept within that on both adapters. */
const MAX_NAME_BYTES = 63;

/** Why a column name is refused, or null when it is fine. */
export function validateColumnName(name: string): string | null {
  if (name.length === 0) return 'a column name is empty';
  if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES) return `a column name may have at most ${MAX_NAME_BYTES} bytes`;
  if (name.toLowerCase() === ROW_ID) return `"${ROW_ID}" is reserved`;
  if (/[\u0000-\u001f]/.test(name)) return 'a column name may not contain control characters';
  return null;
}
