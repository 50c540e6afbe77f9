import nodeSqlParser from 'node-sql-parser';
import { problems } from '../../kernel/plugin-api.ts';

const parser = new nodeSqlParser.Parser();
const POSTGRES = { database: 'PostgresQL' };

const refuse = (message: string) => problems.badRequest(`the import query is refused: ${message}`, [{ path: 'body.query', message }]);

/**
 * The text of an import query once it is known to be exactly one SELECT (WITH allowed), without
 * a trailing semicolon. This answers a clear 400 before anything reaches the source; it is not the
 * only guard, since a parser can read SQL differently from Postgres (`'a\'; delete …` is one
 * string here, but two statements there): the query is also sent with the extended protocol, which
 * refuses several statements, inside a read-only transaction.
 */
export function readOnlyQuery(text: string): string {
  const sql = text.trim().replace(/[;\s]+$/, '');
  let statements: unknown[];
  let tables: string[];
  try {
    const ast = parser.astify(sql, POSTGRES);
    statements = Array.isArray(ast) ? ast : [ast];
    tables = parser.tableList(sql, POSTGRES);
  } catch (err) {
    throw refuse(`it could not be parsed as one SELECT: ${(err as Error).message.split('\n')[0]}`);
  }
  if (statements.length !== 1) throw refuse(`send exactly one statement, not ${statements.length}`);
  const statement = statements[0] as { type?: string; into?: { expr?: unknown } };
  if (statement.type !== 'select') throw refuse(`only a SELECT can be imported, not ${String(statement.type).toUpperCase()}`);
  if (statement.into?.expr) throw refuse('SELECT INTO is not allowed');
  // Entries are `kind::schema::table`: a SELECT that embeds a writing statement shows it here.
  const writing = tables.map((entry) => entry.split('::')[0]).find((kind) => kind !== 'select');
  if (writing) throw refuse(`only a SELECT can be imported, not ${writing.toUpperCase()}`);
  return sql;
}
