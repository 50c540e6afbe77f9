// Plain JavaScript so both the SQLite adapter and its query worker thread (sqlite-query-worker.mjs,
// which runs without the TypeScript loader) can register the same function.

const MAX_COMPILED = 100;

/** SQLite has the REGEXP operator but no implementation: this one uses JavaScript regular expressions. */
export function registerRegexp(database) {
  const compiled = new Map();
  database.function('regexp', { deterministic: true }, (pattern, value) => {
    if (value === null || pattern === null) return null;
    let regex = compiled.get(String(pattern));
    if (!regex) {
      if (compiled.size > MAX_COMPILED) compiled.clear();
      compiled.set(String(pattern), (regex = new RegExp(String(pattern))));
    }
    return regex.test(String(value)) ? 1 : 0;
  });
}
