// Row objects made from values, shared by the SQLite read pool (sqlite-read-pool.ts) and the recipe
// handler's thread (plugins/pipeline/handler-worker.mjs). Plain JavaScript: the handler's thread
// starts without the TypeScript loader.

/**
 * A row as an object with own keys only: a column named `__proto__` or `toString` is a value like
 * any other. The maker is an object literal compiled once per column list, its keys written as
 * string literals (JSON.stringify: no text of a key can leave its literal), so V8 builds every row
 * from one boilerplate shape — several times cheaper per row than computed keys, Object.fromEntries
 * or setting properties one by one. `__proto__` alone is a computed key: written literally it would
 * set the prototype instead of defining an own property.
 */
function compile(columns, valueOf) {
  const fields = columns.map((name, i) => `${name === '__proto__' ? `[${JSON.stringify(name)}]` : JSON.stringify(name)}: ${valueOf(i)}`).join(', ');
  return new Function(`return (v, r) => ({ ${fields} });`)();
}

/** `make(values)`: the row whose i-th column holds `values[i]`. */
export function rowFromValues(columns) {
  return compile(columns, (i) => `v[${i}]`);
}

/** `make(values, r)`: the r-th row of a page given by column (`values[i][r]`). */
export function rowFromColumns(columns) {
  return compile(columns, (i) => `v[${i}][r]`);
}
