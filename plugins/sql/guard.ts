import { problems } from '../../kernel/plugin-api.ts';
import { parseSelect, SelectRefusedError, type SelectStatement } from '../../storage/index.ts';

/**
 * Functions no governed query may call: server files and settings, large objects, other
 * databases, catalog dumps, extension loading (Postgres `pg_*`, SQLite `sqlite_*` and its
 * table-valued `pragma_*` functions included).
 */
const DENIED_FUNCTION = /^(pg_|lo_|sqlite_|pragma_|dblink|current_setting$|set_config$|load_extension$|readfile$|writefile$|edit$|fts3_tokenizer$|query_to_xml|table_to_xml|cursor_to_xml|schema_to_xml|database_to_xml|txid_|inet_server_|inet_client_|version$|current_user$|session_user$|user$|current_database$|current_schema)/i;

export interface GuardedSql {
  /** The statement without a trailing semicolon. */
  sql: string;
  /** Dataset names the statement reads, as written. */
  datasets: string[];
  /** Whether the statement opens with its own WITH clause (and RECURSIVE). */
  withClause: { recursive: boolean } | null;
}

const fail = (message: string) => problems.badRequest(message, [{ path: 'body.sql', message }]);

function functionNames(node: unknown, found: Set<string>) {
  if (Array.isArray(node)) return node.forEach((n) => functionNames(n, found));
  if (!node || typeof node !== 'object') return;
  const record = node as Record<string, unknown>;
  if (record.type === 'function' || record.type === 'aggr_func') {
    const name = record.name as unknown;
    if (typeof name === 'string') found.add(name);
    else if (name && typeof name === 'object' && Array.isArray((name as { name?: unknown }).name)) {
      found.add(((name as { name: { value: string }[] }).name.map((part) => part.value).join('.')));
    }
  }
  for (const value of Object.values(record)) functionNames(value, found);
}

/** Names of the tables a part of the statement reads (FROM and JOIN entries, not column references). */
function tablesRead(node: unknown, found: Set<string>) {
  if (Array.isArray(node)) return node.forEach((n) => tablesRead(n, found));
  if (!node || typeof node !== 'object') return;
  const record = node as Record<string, unknown>;
  if (typeof record.table === 'string' && 'db' in record && record.type !== 'column_ref') found.add(record.table.toLowerCase());
  for (const value of Object.values(record)) tablesRead(value, found);
}

const cteName = (entry: { name: { value?: string } | string }) => (typeof entry.name === 'string' ? entry.name : (entry.name.value ?? '')).toLowerCase();

/**
 * Without RECURSIVE, a WITH query sees only the queries defined before it: a name it reads that
 * is its own or a later query's would reach a table of the database itself (the platform's users,
 * a system catalog), not the WITH query of that name. Refused rather than trusted to fail.
 */
function checkWithScopes(entries: { name: { value?: string } | string; stmt: unknown }[], recursive: boolean) {
  if (recursive) return;
  const names = entries.map(cteName);
  entries.forEach((entry, i) => {
    const read = new Set<string>();
    tablesRead(entry.stmt, read);
    const unseen = names.slice(i).find((name) => read.has(name));
    if (unseen !== undefined) throw fail(`WITH query "${names[i]}" reads "${unseen}", which is not defined before it (name each WITH query after the ones it reads, or use WITH RECURSIVE)`);
  });
}

/**
 * Admits one read-only SELECT (WITH allowed) and names the datasets it reads. Anything else —
 * DDL, DML, several statements, PRAGMA, ATTACH, COPY, SELECT INTO, schema-qualified names (system
 * catalogs, other organizations), denied functions — is a 400 saying why.
 */
export function guard(text: string, dialect: 'PostgresQL' | 'Sqlite'): GuardedSql {
  let parsed: SelectStatement;
  try {
    parsed = parseSelect(text, dialect);
  } catch (err) {
    if (err instanceof SelectRefusedError) throw fail(err.message);
    throw err;
  }
  const { sql, ast: statement, tables } = parsed;

  const opening = /^with\s+(recursive\s+)?/i.exec(sql);
  const withEntries = (statement.with as { name: { value?: string } | string; stmt: unknown }[] | null) ?? [];
  checkWithScopes(withEntries, !!opening?.[1]);
  const cteNames = new Set(withEntries.map(cteName));
  const datasets = new Set<string>();
  for (const { schema, table } of tables) {
    if (schema !== 'null') throw fail(`"${schema}.${table}" is not reachable: name datasets directly, without a schema`);
    if (!cteNames.has(table.toLowerCase())) datasets.add(table);
  }
  const functions = new Set<string>();
  functionNames(statement, functions);
  const denied = [...functions].find((name) => DENIED_FUNCTION.test(name.replace(/^.*\./, '')) || name.includes('.'));
  if (denied) throw fail(`function ${denied} is not allowed in governed SQL`);

  return { sql, datasets: [...datasets], withClause: opening ? { recursive: !!opening[1] } : null };
}
