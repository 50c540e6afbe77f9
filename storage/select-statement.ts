/** A read-only query refused before it reaches a database; the message says why. */
export class SelectRefusedError extends Error {}

/** A statement admitted for governed SQL, and the names of the tables it may read. */
export interface GovernedSelect {
  /** The statement's own text, without a trailing semicolon. */
  sql: string;
  /**
   * `exact`: the tables it reads beyond its own WITH queries, as the database resolves them (each
   * must be a dataset). Otherwise the names it might read (every identifier it spells): those that
   * are datasets are offered to it, the rest mean nothing, and the compiled statement decides.
   */
  relations: string[];
  exact: boolean;
}

/** Most distinct names taken from one statement. */
const MAX_NAMES = 1000;
/** A dataset table's own name (`org_<id>__ds_<id>`): datasets are named by their dataset name. */
const PHYSICAL_TABLE = /^org_\d+__/i;
/** An unquoted identifier, or one quoted SQLite's ways: "…", `…`, […]. */
const IDENTIFIER = /"((?:[^"]|"")*)"|`((?:[^`]|``)*)`|\[([^\]]*)\]|([\p{L}_][\p{L}\p{N}_$]*)/gu;

/**
 * Governed SQL on SQLite has no text check of its own: no parser but SQLite's reads SQL exactly as
 * SQLite does (a backslash before a quote, nested comments, keywords as names…), so SQLite compiles
 * the statement and its compiled program is checked before it runs (sqlite-governed-check.mjs).
 * Here only the names it spells are gathered, so that the datasets among them can be offered to it.
 */
export function parseSqliteGovernedSelect(text: string): GovernedSelect {
  const sql = text.trim().replace(/[;\s]+$/, '');
  if (!sql) throw new SelectRefusedError('the query is empty');
  const names = new Map<string, string>();
  for (const match of sql.matchAll(IDENTIFIER)) {
    const name = match[1]?.replace(/""/g, '"') ?? match[2]?.replace(/``/g, '`') ?? match[3] ?? match[4];
    if (PHYSICAL_TABLE.test(name)) throw new SelectRefusedError(`"${name}" is not reachable: name datasets by their dataset name`);
    if (!names.has(name.toLowerCase())) names.set(name.toLowerCase(), name);
    if (names.size > MAX_NAMES) throw new SelectRefusedError(`the query spells more than ${MAX_NAMES} distinct names`);
  }
  return { sql, relations: [...names.values()], exact: false };
}
