// Row objects made from values, shared by the SQLite read pool (sqlite-read-pool.ts) and the recipe
// handler's thread (plugins/pipeline/handler-worker.mjs). Plain JavaScript: the handler's thread
// starts without the TypeScript loader.

/**
 * A row as an object with own keys only: a column named `__proto__` or `toString` is a value like
 * any other. The maker is an object literal with computed keys, compiled once per column list:
 * keys come from the closure, never from the code's text, and a computed `__proto__` key defines
 * an own property (it does not set the prototype). Several times cheaper per row than
 * Object.fromEntries or setting the properties one by one.
 */
function compile(columns, valueOf) {
  const fields = columns.map((_, i) => `[k[${i}]]: ${valueOf(i)}`).join(', ');
  return new Function('k', `return (v, r) => ({ ${fields} });`)(columns);
}

/** `make(values)`: the row whose i-th column holds `values[i]`. */
export function rowFromValues(columns) {
  return compile(columns, (i) => `v[${i}]`);
}

/** `make(values, r)`: the r-th row of a page given by column (`values[i][r]`). */
export function rowFromColumns(columns) {
  return compile(columns, (i) => `v[${i}][r]`);
}
