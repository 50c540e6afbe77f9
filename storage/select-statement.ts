import nodeSqlParser from 'node-sql-parser';

const parser = new nodeSqlParser.Parser();

/** A read-only query refused before it reaches a database; the message says why. */
export class SelectRefusedError extends Error {}

/** One table the statement names: how it uses it (`select`, …), its schema (`null` when unqualified) and name. */
export interface TableUse {
  kind: string;
  schema: string;
  table: string;
}

export interface SelectStatement {
  /** The text without leading comments and a trailing semicolon. */
  sql: string;
  /** node-sql-parser's tree of the SELECT. */
  ast: Record<string, unknown>;
  tables: TableUse[];
}

/**
 * Parses `text` as exactly one read-only SELECT (WITH allowed) in the dialect: several
 * statements, any other statement, SELECT INTO or a writing statement inside it are refused with
 * a SelectRefusedError. Shared by governed SQL and the postgresql connector's import query.
 */
export function parseSelect(text: string, dialect: 'PostgresQL' | 'Sqlite'): SelectStatement {
  const sql = text.replace(/^(\s|--[^\n]*\n|\/\*[\s\S]*?\*\/)*/, '').trim().replace(/[;\s]+$/, '');
  let parsed: unknown;
  let tables: TableUse[];
  try {
    parsed = parser.astify(sql, { database: dialect });
    tables = parser.tableList(sql, { database: dialect }).map((entry) => {
      const [kind, schema, table] = entry.split('::');
      return { kind, schema, table };
    });
  } catch (err) {
    throw new SelectRefusedError(`the query could not be parsed: ${(err as Error).message.split('\n')[0]}`);
  }
  const statements = Array.isArray(parsed) ? parsed : [parsed];
  if (statements.length !== 1) throw new SelectRefusedError(`send exactly one statement, not ${statements.length}`);
  const ast = statements[0] as Record<string, unknown>;
  if (ast.type !== 'select') throw new SelectRefusedError(`only a read-only SELECT is allowed, not ${String(ast.type).toUpperCase()}`);
  if ((ast.into as { expr?: unknown } | undefined)?.expr) throw new SelectRefusedError('SELECT INTO is not allowed');
  // A SELECT that embeds a writing statement shows it among the tables it names.
  const writing = tables.find((use) => use.kind !== 'select');
  if (writing) throw new SelectRefusedError(`only a read-only SELECT is allowed, not ${writing.kind.toUpperCase()}`);
  return { sql, ast, tables };
}
