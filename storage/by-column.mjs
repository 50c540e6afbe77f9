// Plain JavaScript so both the adapters (long-reads.ts) and the SQLite read workers
// (sqlite-read-worker.mjs, which run without the TypeScript loader) turn rows into columns alike.

/**
 * Rows given as arrays, by column: `values[i][r]` is `rows[r][i]`. Each column is filled by push,
 * not preallocated: a holey array is copied between threads element by element, a packed one at once.
 */
export function byColumn(width, rows) {
  const values = [];
  for (let i = 0; i < width; i += 1) {
    const column = [];
    for (const row of rows) column.push(row[i]);
    values.push(column);
  }
  return values;
}
