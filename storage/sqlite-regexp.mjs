// Plain JavaScript so both the SQLite adapter and its governed-SQL query processes
// (sqlite-governed-process.mjs, which run without the TypeScript loader) can register the same function.
import { RE2JS } from 're2js';

const MAX_COMPILED = 100;
/** Compiled patterns of this thread, least recently used first. */
const compiled = new Map();

/**
 * `pattern` compiled by RE2 (re2js): matching takes time linear in the text, whatever the pattern,
 * so a user's pattern cannot stall the thread as a backtracking engine can (`^(a+)+$`). Throws RE2's
 * syntax error for a pattern it refuses (backreferences, lookaround, …). Cached, at most 100.
 */
export function compileRegexp(pattern) {
  let regex = compiled.get(pattern);
  if (regex) {
    compiled.delete(pattern);
  } else {
    regex = RE2JS.compile(pattern);
    if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value);
  }
  compiled.set(pattern, regex);
  return regex;
}

/** SQLite has the REGEXP operator but no implementation: this one is RE2 (see `compileRegexp`). */
export function registerRegexp(database) {
  let lastPattern;
  let lastRegex;
  database.function('regexp', { deterministic: true }, (pattern, value) => {
    if (value === null || pattern === null) return null;
    // A query calls this once per row with the same pattern: no cache bookkeeping for those.
    if (pattern !== lastPattern) {
      lastRegex = compileRegexp(String(pattern));
      lastPattern = pattern;
    }
    return lastRegex.test(String(value)) ? 1 : 0;
  });
}
