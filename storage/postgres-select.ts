import { loadModule, parseSync } from 'libpg-query';
import { SelectRefusedError, type GovernedSelect } from './select-statement.ts';

// Postgres's own parser, compiled to WebAssembly: the statement is read exactly as the server reads it.
// Loaded on first use (a SQLite platform never needs it); a failed load is tried again next time.
let parserReady: Promise<void> | undefined;
const parser = () =>
  (parserReady ??= loadModule().catch((err: unknown) => {
    parserReady = undefined;
    throw err;
  }));

type Node = Record<string, unknown>;

/**
 * Functions a governed statement may not call: they reach outside the query (files, settings,
 * locks, signals, other sessions, large objects, other databases), run SQL written in a string
 * (where no parse of the statement can see what it reads), or describe objects beyond the
 * organization's datasets (catalog lookups by name, object definitions, privileges).
 */
const DENIED_FUNCTION =
  /^(pg_|lo_|dblink|current_setting$|set_config$|txid_|inet_(client|server)_|version$|current_database$|current_schema|current_query$|system_user$|getpgusername$|query_to_xml|table_to_xml|cursor_to_xml|schema_to_xml|database_to_xml|ts_stat$|ts_rewrite$|has_\w*privilege$|to_reg|reg(class|collation|config|dictionary|namespace|oper|operator|proc|procedure|role|type)(in|out|recv|send)?$|obj_description$|col_description$|shobj_description$|format_type$|row_security_active$|nextval$|currval$|setval$|lastval$|brin_|gin_clean_pending_list$|binary_upgrade_)/i;
/**
 * Types that look objects up by name or oid in the catalog (`'org_2.ds_1'::regclass`, their arrays
 * `_regclass`), or show privileges (`aclitem`).
 */
const CATALOG_LOOKUP_TYPE = /^_?(reg[a-z]*|aclitem)$/i;
/** The schema of the built-in functions and types Postgres's grammar itself writes (`extract`, `substring`, `int4`). */
const BUILT_IN_SCHEMA = 'pg_catalog';
/** SQL value functions naming roles or the database (`current_user`, `session_user`, …). */
const DENIED_VALUE_FUNCTION = /^SVFOP_(CURRENT_USER|CURRENT_ROLE|SESSION_USER|USER|CURRENT_CATALOG|CURRENT_SCHEMA)$/;
const WRITING_STATEMENTS = ['InsertStmt', 'UpdateStmt', 'DeleteStmt', 'MergeStmt'];

const names = (list: unknown) => ((list as { String?: { sval: string } }[] | undefined) ?? []).map((n) => n.String?.sval ?? '');

/**
 * Parses `text` as exactly one read-only SELECT (WITH, VALUES and set operations allowed) and
 * answers the tables it reads that are not its own WITH queries, honouring Postgres's scoping of
 * WITH queries (a later query, or one of an inner WITH, is not visible to an earlier one without
 * RECURSIVE) and its case folding (a quoted name keeps its case). Refused with the reason: several
 * statements, anything but SELECT, SELECT INTO, FOR UPDATE/SHARE, a writing statement inside, a
 * schema-qualified name, and the functions and casts above.
 */
/**
 * Built-ins the grammar writes as ordinary calls for SQL's own syntax: `x LIKE p ESCAPE e` is
 * `pg_catalog.like_escape(p, e)`, `SIMILAR TO … ESCAPE` `similar_to_escape`. Pure text functions.
 */
const SYNTAX_FUNCTIONS = new Set(['like_escape', 'similar_to_escape', 'similar_escape']);

export async function parsePostgresGovernedSelect(text: string): Promise<GovernedSelect> {
  const { sql, statement } = await parsePostgresSelect(text);
  const relations = new Set<string>();
  deeply(() => walk(statement, new Set(), relations));
  return { sql, relations: [...relations], exact: true };
}

/**
 * Parses `text` as exactly one read-only SELECT: the statement's own text (without a trailing
 * semicolon or what follows it) and its tree. For the postgresql connector's import query too.
 */
export async function parsePostgresSelect(text: string): Promise<{ sql: string; statement: Node }> {
  await parser();
  let parsed: { stmts?: { stmt: Node; stmt_location?: number; stmt_len?: number }[] };
  try {
    parsed = parseSync(text);
  } catch (err) {
    throw new SelectRefusedError(`the query could not be parsed: ${(err as Error).message.split('\n')[0]}`);
  }
  const statements = parsed.stmts ?? [];
  if (statements.length !== 1) throw new SelectRefusedError(statements.length ? `send exactly one statement, not ${statements.length}` : 'the query is empty');
  const [{ stmt, stmt_location: start = 0, stmt_len: length = 0 }] = statements;
  const kind = Object.keys(stmt)[0];
  if (kind !== 'SelectStmt') throw new SelectRefusedError(`only a read-only SELECT is allowed, not ${kind.replace(/Stmt$/, '').toUpperCase()}`);
  if ((stmt.SelectStmt as Node).intoClause) throw new SelectRefusedError('SELECT INTO is not allowed');
  // Locations are byte offsets into the UTF-8 text.
  const bytes = Buffer.from(text, 'utf8');
  const sql = bytes.subarray(start, length ? start + length : undefined).toString('utf8').trim();
  deeply(() => refuseWriting(stmt));
  return { sql, statement: stmt };
}

/** Runs a walk of the tree; one nested past the stack's depth is refused, not a crash. */
function deeply(walkTree: () => void): void {
  try {
    walkTree();
  } catch (err) {
    if (err instanceof RangeError) throw new SelectRefusedError('the query is nested too deeply');
    throw err;
  }
}

function refuseWriting(node: unknown): void {
  if (Array.isArray(node)) return node.forEach(refuseWriting);
  if (!node || typeof node !== 'object') return;
  for (const [key, value] of Object.entries(node as Node)) {
    if (WRITING_STATEMENTS.includes(key)) throw new SelectRefusedError(`only a read-only SELECT is allowed, not ${key.replace(/Stmt$/, '').toUpperCase()}`);
    if (key === 'lockingClause') throw new SelectRefusedError('FOR UPDATE and FOR SHARE are not allowed in a read-only query');
    if (key === 'intoClause') throw new SelectRefusedError('SELECT INTO is not allowed');
    refuseWriting(value);
  }
}

/** Walks the tree, adding to `relations` every table name that is not a WITH query visible where it is read. */
function walk(node: unknown, visible: Set<string>, relations: Set<string>): void {
  if (Array.isArray(node)) return node.forEach((n) => walk(n, visible, relations));
  if (!node || typeof node !== 'object') return;
  for (const [key, value] of Object.entries(node as Node)) {
    const body = value as Node;
    switch (key) {
      case 'SelectStmt': {
        const withClause = body.withClause as { ctes: { CommonTableExpr: Node }[]; recursive?: boolean } | undefined;
        if (!withClause) {
          walk(body, visible, relations);
          break;
        }
        const ctes = withClause.ctes.map((c) => c.CommonTableExpr);
        const all = new Set([...visible, ...ctes.map((c) => c.ctename as string)]);
        ctes.forEach((cte, i) => {
          // Without RECURSIVE a WITH query sees only the ones before it.
          const seen = withClause.recursive ? all : new Set([...visible, ...ctes.slice(0, i).map((c) => c.ctename as string)]);
          walk(cte.ctequery, seen, relations);
        });
        const { withClause: _ignored, ...rest } = body;
        walk(rest, all, relations);
        break;
      }
      case 'RangeVar': {
        const schema = body.schemaname as string | undefined;
        const name = body.relname as string;
        if (schema || body.catalogname) throw new SelectRefusedError(`"${schema}.${name}" is not reachable: name datasets directly, without a schema`);
        if (!visible.has(name)) relations.add(name);
        break;
      }
      case 'FuncCall': {
        const parts = names(body.funcname);
        // The grammar writes SQL's own syntax (extract(… from …), substring(… from …), at time zone…)
        // as a call of a built-in; any other qualified name is refused.
        const builtIn = parts.length === 2 && parts[0] === BUILT_IN_SCHEMA && (body.funcformat === 'COERCE_SQL_SYNTAX' || SYNTAX_FUNCTIONS.has(parts[1]));
        if (parts.length > 1 && !builtIn) throw new SelectRefusedError(`function ${parts.join('.')} is not allowed in governed SQL (call functions without a schema)`);
        const name = parts.at(-1)!;
        if (DENIED_FUNCTION.test(name)) throw new SelectRefusedError(`function ${name} is not allowed in governed SQL`);
        walk(body, visible, relations);
        break;
      }
      case 'typeName': {
        // Every place a type is named: casts, column lists of functions in FROM, XMLTABLE, RETURNING…
        const typeNames = names(body.names);
        const type = typeNames.at(-1) ?? '';
        // A type of another schema is a table's row type (`null::public.users` shows its columns).
        if (typeNames.length > 1 && typeNames[0] !== BUILT_IN_SCHEMA) throw new SelectRefusedError(`the type ${typeNames.join('.')} is not allowed in governed SQL`);
        if (CATALOG_LOOKUP_TYPE.test(type)) throw new SelectRefusedError(`the type ${type} is not allowed in governed SQL`);
        walk(body, visible, relations);
        break;
      }
      case 'SQLValueFunction':
        if (DENIED_VALUE_FUNCTION.test(String(body.op))) throw new SelectRefusedError(`${String(body.op).replace(/^SVFOP_/, '').toLowerCase()} is not allowed in governed SQL`);
        break;
      default:
        walk(value, visible, relations);
    }
  }
}
