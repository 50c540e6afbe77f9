// What both governed-SQL processes of the SQLite adapter share (sqlite-governed-process.mjs reads,
// sqlite-governed-write-process.mjs writes): the check of a statement's compiled program, the
// binding of its parameters, and the answer to the parent for each message.
//
// No parser decides what a statement reads: SQLite's compiled program (EXPLAIN) lists every table
// and index it opens and every function it calls, and the statement runs only when each of them is
// a table of the datasets it names, read as the caller may see them, or a function on the list below.

/** Functions that compute from their arguments only: no files, settings, extensions or catalog. */
const ALLOWED_FUNCTIONS = new Set(
  [
    // core
    'abs', 'char', 'coalesce', 'concat', 'concat_ws', 'format', 'glob', 'hex', 'ifnull', 'iif', 'if', 'instr', 'length',
    'like', 'likelihood', 'likely', 'lower', 'ltrim', 'max', 'min', 'nullif', 'octet_length', 'printf', 'quote', 'random',
    'replace', 'round', 'rtrim', 'sign', 'soundex', 'substr', 'substring', 'trim', 'typeof', 'unhex', 'unicode', 'unlikely',
    'upper', 'regexp',
    // date and time
    'date', 'time', 'datetime', 'julianday', 'unixepoch', 'strftime', 'timediff', 'current_date', 'current_time', 'current_timestamp',
    // math
    'acos', 'acosh', 'asin', 'asinh', 'atan', 'atan2', 'atanh', 'ceil', 'ceiling', 'cos', 'cosh', 'degrees', 'exp', 'floor', 'ln',
    'log', 'log10', 'log2', 'mod', 'pi', 'pow', 'power', 'radians', 'sin', 'sinh', 'sqrt', 'tan', 'tanh', 'trunc',
    // aggregates and windows
    'avg', 'count', 'group_concat', 'string_agg', 'sum', 'total', 'median', 'percentile', 'percentile_cont', 'percentile_disc',
    'row_number', 'rank', 'dense_rank', 'percent_rank', 'cume_dist', 'ntile', 'lag', 'lead', 'first_value', 'last_value', 'nth_value',
    // JSON
    'json', 'jsonb', 'json_array', 'jsonb_array', 'json_array_length', 'json_error_position', 'json_extract', 'jsonb_extract',
    'json_insert', 'jsonb_insert', 'json_object', 'jsonb_object', 'json_patch', 'jsonb_patch', 'json_pretty', 'json_quote',
    'json_remove', 'jsonb_remove', 'json_replace', 'jsonb_replace', 'json_set', 'jsonb_set', 'json_type', 'json_valid',
    'json_group_array', 'jsonb_group_array', 'json_group_object', 'jsonb_group_object', '->', '->>',
  ],
);
const FUNCTION_OPCODES = new Set(['Function', 'PureFunc', 'AggStep', 'AggStep1', 'AggFinal', 'AggValue', 'AggInverse']);
const VIRTUAL_TABLE_OPCODES = new Set(['VOpen', 'VFilter', 'VColumn', 'VNext', 'VUpdate', 'VBegin', 'VCreate', 'VDestroy', 'VRename', 'VCheck', 'VInitIn']);

/** A statement the check (or its own text) makes unfit: the caller's mistake. */
export class Refused extends Error {
  rejected = true;
}

/** The schema of each connection: its objects by root page, and tables' column positions. */
const schemaCaches = new WeakMap();

/** The database's objects by root page, and tables' column positions; read again only when the schema changed. */
function schemaOf(db) {
  const version = db.pragma('schema_version', { simple: true });
  let cache = schemaCaches.get(db);
  if (cache?.version !== version) {
    const objects = new Map(db.prepare('select type, name, tbl_name, rootpage from sqlite_schema where rootpage > 0').all().map((o) => [o.rootpage, o]));
    schemaCaches.set(db, (cache = { version, objects, columns: new Map() }));
  }
  const { objects, columns } = cache;
  return {
    objects,
    columns(table) {
      if (!columns.has(table)) columns.set(table, new Map(db.prepare('select cid, name from pragma_table_info(?)').all(table).map((c) => [c.name, c.cid])));
      return columns.get(table);
    },
  };
}

/**
 * Refuses the statement unless its compiled program reads only the allowed tables (main database,
 * each dataset's table or an index of it), never a masked column, each row-filtered table at most
 * once (its filtered query is materialized: a second read would be the table named around the
 * filter), no virtual table, and only allowed functions. Call it inside the transaction that runs
 * the statement: the program checked is then the program run (the schema cannot change under it).
 */
export function checkProgram(db, sql, bound, allowed) {
  const { objects, columns } = schemaOf(db);
  const byTable = new Map(allowed.map((entry) => [entry.table, entry]));
  const maskedIndexes = new Map();
  for (const entry of allowed) {
    const positions = columns(entry.table);
    maskedIndexes.set(entry.table, new Set(entry.masked.map((name) => positions.get(name))));
  }
  const cursors = new Map();
  const reads = new Map();
  for (const op of db.prepare(`explain ${sql}`).all(...bound)) {
    if (op.opcode === 'OpenRead' || op.opcode === 'ReopenIdx' || op.opcode === 'OpenWrite') {
      const object = op.p3 === 0 ? objects.get(op.p2) : undefined;
      const table = object && (object.type === 'index' ? object.tbl_name : object.name);
      const entry = table && byTable.get(table);
      if (!entry || op.opcode === 'OpenWrite') throw new Refused(object ? `no dataset named "${object.name}" in this organization` : 'the statement reads a table that is not one of its datasets');
      if (object.type === 'index' && entry.masked.length) {
        const indexed = db.prepare('select name from pragma_index_info(?)').all(object.name).map((c) => c.name);
        if (indexed.some((name) => entry.masked.includes(name))) throw new Refused(`the statement reads a masked column of "${entry.name}"`);
      }
      cursors.set(op.p1, object.type === 'index' ? null : entry);
      reads.set(entry, (reads.get(entry) ?? 0) + 1);
      if (entry.filtered && reads.get(entry) > 1) throw new Refused(`the statement reads "${entry.name}" around its row policy`);
    } else if (op.opcode === 'Column') {
      const entry = cursors.get(op.p1);
      if (entry && maskedIndexes.get(entry.table).has(op.p2)) throw new Refused(`the statement reads a masked column of "${entry.name}"`);
    } else if (VIRTUAL_TABLE_OPCODES.has(op.opcode)) {
      throw new Refused('table-valued functions and virtual tables (json_each, pragma_…) are not available in governed SQL');
    } else if (FUNCTION_OPCODES.has(op.opcode)) {
      const name = String(op.p4).replace(/\(-?\d+\)$/, '').toLowerCase();
      if (!ALLOWED_FUNCTIONS.has(name)) throw new Refused(`function ${name} is not allowed in governed SQL`);
    }
  }
}

/** The statement's parameters as better-sqlite3 binds them: `$1`, `$2`, … by name; true and false as 1 and 0, as in SQLite's own tables. */
export function bindings(params) {
  const named = Object.fromEntries(params.map((value, i) => [String(i + 1), typeof value === 'boolean' ? Number(value) : value]));
  return params.length ? [named] : [];
}

/** SQLite errors that are no fault of the statement: the file, the disk, a lock. */
const OPERATIONAL = /^SQLITE_(IOERR|CORRUPT|CANTOPEN|BUSY|LOCKED|FULL|NOTADB|PERM|READONLY|PROTOCOL|INTERNAL)/;

/** Answers each message from the parent with what `handle` returns, or the error it threw. */
export function serve(handle) {
  process.on('message', (message) => {
    try {
      process.send(handle(message));
    } catch (err) {
      // A name that is neither a dataset offered to the statement nor anything else SQLite knows.
      const unknown = /^no such table: (?:main\.)?(.*)$/.exec(err.message);
      const error = unknown ? `no dataset named "${unknown[1]}" in this organization` : err.message;
      // Anything else the statement caused (syntax, binding, several statements, out of memory) is its own fault.
      process.send({ error, rejected: !OPERATIONAL.test(String(err.code)) });
    }
  });
}
