import { parsePostgresSelect, type DataColumn } from '../../storage/index.ts';
import type { ColumnOrigin, RecipeDataset } from '../pipeline/public.ts';

/**
 * Where each result column of a `sql` recipe comes from, read from the parsed query (Postgres's
 * own parser): column references through table aliases, WITH queries, subqueries, joins and set
 * operations, `*` and `t.*` expanded. A query it cannot parse (SQLite-only syntax, say) or resolve
 * (a table function, a recursive WITH, an ambiguous name) falls back to name matching.
 */
export async function sqlColumnOrigins(query: string, inputs: RecipeDataset[], result: DataColumn[]): Promise<ColumnOrigin[]> {
  try {
    const { statement } = await parsePostgresSelect(query);
    const traced = new QueryTracer(inputs).select(statement, new Map(), null);
    // The parse and the database must agree on the result's shape, else the trace is not trusted.
    if (traced.length !== result.length) return originsByName(inputs, result);
    return traced.map((column, i) => finalOrigin(column.origin, result[i].name));
  } catch {
    // Not parsed, untraceable, nested past the stack, or shaped unlike what the tracer expects:
    // lineage is best effort and must never keep a recipe from being saved.
    return originsByName(inputs, result);
  }
}

/** The first approximation: a result column named like a column of an input reads it (identity); any other is derived from unknown columns. */
function originsByName(inputs: RecipeDataset[], result: DataColumn[]): ColumnOrigin[] {
  return result.map((column) => {
    const input = inputs.findIndex((d) => d.columns.some((c) => c.name === column.name));
    return input >= 0 ? { from: [{ input, column: column.name }], transformation: 'identity' } : { from: [], transformation: 'derived' };
  });
}

type Node = Record<string, any>;

/** Something in the query the tracer does not follow: the caller falls back to name matching. */
class Untraceable extends Error {}

/**
 * An origin while tracing: `reference` is a column read as it is, whose final name decides
 * between identity and renamed. Kinds are ordered: a column is as transformed as its most
 * transformed step (a sum of a cast column is aggregated).
 */
const KINDS = ['reference', 'cast', 'derived', 'aggregated'] as const;
type Kind = (typeof KINDS)[number];
interface Trace {
  from: { input: number; column: string }[];
  kind: Kind;
}

const strongest = (a: Kind, b: Kind): Kind => (KINDS.indexOf(a) >= KINDS.indexOf(b) ? a : b);

/** Merges the traces of several columns into one of `kind` or stronger. */
function merged(traces: Trace[], kind: Kind): Trace {
  const from = new Map<string, { input: number; column: string }>();
  for (const trace of traces) for (const f of trace.from) from.set(`${f.input}\u0000${f.column}`, f);
  return { from: [...from.values()], kind: traces.reduce((k, t) => strongest(k, t.kind), kind) };
}

function finalOrigin(trace: Trace, name: string): ColumnOrigin {
  // A cast of a constant converts no column: it is a computed value.
  if (trace.kind === 'cast' && !trace.from.length) return { from: [], transformation: 'derived' };
  if (trace.kind !== 'reference') return { from: trace.from, transformation: trace.kind };
  return { from: trace.from, transformation: trace.from.every((f) => f.column === name) ? 'identity' : 'renamed' };
}

/** A column of a relation in scope: its name as SQL refers to it, and where it comes from. */
interface ScopeColumn {
  name: string;
  origin: Trace;
}
interface Relation {
  name: string;
  columns: ScopeColumn[];
}
/** The FROM items visible to an expression, and the enclosing query's (for correlated subqueries). */
interface Scope {
  relations: Relation[];
  parent: Scope | null;
}
type WithQueries = Map<string, ScopeColumn[]>;

/** Functions computing one value from many rows (Postgres's and SQLite's usual ones). */
const AGGREGATES = new Set([
  'count', 'sum', 'avg', 'min', 'max', 'array_agg', 'string_agg', 'json_agg', 'jsonb_agg', 'json_object_agg', 'jsonb_object_agg',
  'bool_and', 'bool_or', 'every', 'bit_and', 'bit_or', 'stddev', 'stddev_pop', 'stddev_samp', 'variance', 'var_pop', 'var_samp',
  'percentile_cont', 'percentile_disc', 'mode', 'group_concat', 'total', 'json_group_array', 'json_group_object', 'corr', 'covar_pop', 'covar_samp',
]);

const sval = (node: Node) => (node.String?.sval as string | undefined) ?? null;

/** Finds a name ignoring case when no exact match exists (unquoted SQL names fold; dataset names match ignoring case). */
function byName<T extends { name: string }>(items: T[], name: string): T[] {
  const exact = items.filter((item) => item.name === name);
  return exact.length ? exact : items.filter((item) => item.name.toLowerCase() === name.toLowerCase());
}

class QueryTracer {
  constructor(private readonly inputs: RecipeDataset[]) {}

  /** The result columns of a SELECT (with its WITH queries, set operations or VALUES). */
  select(node: Node, outerWith: WithQueries, parent: Scope | null): ScopeColumn[] {
    const stmt = node.SelectStmt as Node | undefined;
    if (!stmt) throw new Untraceable('not a SELECT');
    const withQueries = this.withQueries(stmt.withClause, outerWith, parent);
    if (stmt.op && stmt.op !== 'SETOP_NONE') return this.setOperation(stmt, withQueries, parent);
    if (stmt.valuesLists) return (stmt.valuesLists[0].List.items as Node[]).map((_, i) => ({ name: `column${i + 1}`, origin: { from: [], kind: 'derived' as const } }));
    const scope: Scope = { relations: (stmt.fromClause ?? []).flatMap((item: Node) => this.fromItem(item, withQueries, parent)), parent };
    return (stmt.targetList as Node[]).flatMap((target) => this.target(target.ResTarget, scope, withQueries));
  }

  private withQueries(withClause: Node | undefined, outer: WithQueries, parent: Scope | null): WithQueries {
    if (!withClause) return outer;
    if (withClause.recursive) throw new Untraceable('recursive WITH');
    const visible = new Map(outer);
    for (const { CommonTableExpr: cte } of withClause.ctes as Node[]) {
      const columns = this.select(cte.ctequery, visible, parent);
      visible.set(cte.ctename, renamed(columns, cte.aliascolnames));
    }
    return visible;
  }

  /** UNION, INTERSECT, EXCEPT: each result column comes from the columns at its place on both sides. */
  private setOperation(stmt: Node, withQueries: WithQueries, parent: Scope | null): ScopeColumn[] {
    const left = this.select({ SelectStmt: stmt.larg }, withQueries, parent);
    const right = this.select({ SelectStmt: stmt.rarg }, withQueries, parent);
    if (left.length !== right.length) throw new Untraceable('set operation sides differ');
    return left.map((column, i) => ({ name: column.name, origin: merged([column.origin, right[i].origin], 'reference') }));
  }

  private fromItem(item: Node, withQueries: WithQueries, parent: Scope | null): Relation[] {
    if (item.RangeVar) {
      const range = item.RangeVar;
      if (range.schemaname) throw new Untraceable('schema-qualified table');
      const columns = withQueries.get(range.relname) ?? this.inputColumns(range.relname);
      return [{ name: range.alias?.aliasname ?? range.relname, columns: renamed(columns, range.alias?.colnames) }];
    }
    if (item.RangeSubselect) {
      const sub = item.RangeSubselect;
      if (!sub.alias) throw new Untraceable('subquery without an alias');
      return [{ name: sub.alias.aliasname, columns: renamed(this.select(sub.subquery, withQueries, parent), sub.alias.colnames) }];
    }
    if (item.JoinExpr) {
      const join = item.JoinExpr;
      // Columns merged by USING or NATURAL, and a join's own alias, are not followed.
      if (join.usingClause || join.isNatural || join.alias) throw new Untraceable('join with USING, NATURAL or an alias');
      return [...this.fromItem(join.larg, withQueries, parent), ...this.fromItem(join.rarg, withQueries, parent)];
    }
    throw new Untraceable(`FROM item ${Object.keys(item)[0]}`);
  }

  private inputColumns(table: string): ScopeColumn[] {
    const matches = byName(this.inputs.map((dataset, input) => ({ name: dataset.name, dataset, input })), table);
    if (matches.length === 0) throw new Untraceable(`unknown table ${table}`);
    // The same dataset read twice is one table: its first place among the inputs names it.
    const [{ dataset, input }] = matches;
    return dataset.columns.map((c) => ({ name: c.name, origin: { from: [{ input, column: c.name }], kind: 'reference' as const } }));
  }

  private target(target: Node, scope: Scope, withQueries: WithQueries): ScopeColumn[] {
    const fields = target.val?.ColumnRef?.fields as Node[] | undefined;
    if (fields && fields[fields.length - 1].A_Star) {
      if (fields.length === 1) return scope.relations.flatMap((r) => r.columns);
      if (fields.length !== 2) throw new Untraceable('qualified star');
      return this.relation(scope, sval(fields[0])!).columns;
    }
    return [{ name: target.name ?? defaultName(target.val), origin: this.expression(target.val, scope, withQueries) }];
  }

  private relation(scope: Scope, name: string): Relation {
    const found = byName(scope.relations, name);
    if (found.length === 1) return found[0];
    if (found.length === 0 && scope.parent) return this.relation(scope.parent, name);
    throw new Untraceable(`table ${name} is ${found.length ? 'ambiguous' : 'unknown'}`);
  }

  private column(scope: Scope, fields: Node[]): Trace {
    const names = fields.map(sval);
    if (names.some((n) => n === null) || names.length > 2) throw new Untraceable('column reference');
    const name = names[names.length - 1]!;
    if (names.length === 2) {
      const found = byName(this.relation(scope, names[0]!).columns, name);
      if (found.length !== 1) throw new Untraceable(`column ${names.join('.')}`);
      return found[0].origin;
    }
    for (let s: Scope | null = scope; s; s = s.parent) {
      const found = byName(s.relations.flatMap((r) => r.columns), name);
      if (found.length === 1) return found[0].origin;
      if (found.length > 1) throw new Untraceable(`ambiguous column ${name}`);
    }
    throw new Untraceable(`unknown column ${name}`);
  }

  /** The trace of a value expression: a column as it is, a cast of one, or derived from (or aggregating) every column it reads. */
  private expression(node: Node, scope: Scope, withQueries: WithQueries): Trace {
    if (node.ColumnRef) return this.column(scope, node.ColumnRef.fields);
    if (node.TypeCast) {
      const inner = this.expression(node.TypeCast.arg, scope, withQueries);
      return { from: inner.from, kind: strongest(inner.kind, 'cast') };
    }
    const traces: Trace[] = [];
    let aggregates = false;
    const visit = (value: unknown): void => {
      if (Array.isArray(value)) return value.forEach(visit);
      if (typeof value !== 'object' || value === null) return;
      const child = value as Node;
      if (child.ColumnRef) return void traces.push(this.column(scope, child.ColumnRef.fields));
      if (child.SubLink) {
        if (child.SubLink.testexpr) visit(child.SubLink.testexpr);
        const inner = this.select(child.SubLink.subselect, withQueries, scope);
        return void traces.push(...inner.map((c) => c.origin));
      }
      if (child.FuncCall && (child.FuncCall.agg_star || AGGREGATES.has(sval(child.FuncCall.funcname.at(-1)) ?? ''))) aggregates = true;
      Object.values(child).forEach(visit);
    };
    visit(node);
    return merged(traces, aggregates ? 'aggregated' : 'derived');
  }
}

/** The name Postgres gives an unnamed result column: a column's, a function's, a cast's inner name or type, else `?column?`. */
function defaultName(node: Node): string {
  if (node.ColumnRef) return sval(node.ColumnRef.fields.at(-1)) ?? '?column?';
  if (node.FuncCall) return sval(node.FuncCall.funcname.at(-1)) ?? '?column?';
  if (node.TypeCast) {
    const inner = defaultName(node.TypeCast.arg);
    return inner !== '?column?' ? inner : (sval(node.TypeCast.typeName.names.at(-1)) ?? inner);
  }
  return '?column?';
}

/** Columns renamed by an alias's column list (`as t(a, b)`); columns past the list keep their names. */
function renamed(columns: ScopeColumn[], names: Node[] | undefined): ScopeColumn[] {
  if (!names) return columns;
  return columns.map((column, i) => (i < names.length ? { ...column, name: sval(names[i]) ?? column.name } : column));
}
