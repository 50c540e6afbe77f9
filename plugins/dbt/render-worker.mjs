// Renders dbt models' raw Jinja with nunjucks, in a worker thread of its own (started by
// render.ts with a heap limit and a time limit per model): a template is code a manifest's author
// wrote, so what it may reach is checked before it runs, and a loop that never ends or a string
// doubled into gigabytes ends this thread, not the server.
import { parentPort, workerData } from 'node:worker_threads';
import nunjucks from 'nunjucks';

/** Attribute names a template may read: a loop's state and the list, dict and string methods dbt projects use. */
const ALLOWED_ATTRIBUTES = new Set([
  'index', 'index0', 'revindex', 'revindex0', 'first', 'last', 'length',
  'items', 'keys', 'values', 'get', 'append', 'extend', 'upper', 'lower', 'strip', 'lstrip', 'rstrip', 'split', 'replace', 'startswith', 'endswith', 'join', 'title', 'capitalize', 'format',
]);
const FORBIDDEN_NAMES = new Set(['constructor', '__proto__', 'prototype', '__defineGetter__', '__defineSetter__', '__lookupGetter__', '__lookupSetter__']);
const MAX_RANGE = 10_000;
const MAX_OUTPUT = 100_000;

class Refused extends Error {}

/**
 * Nunjucks compiles a template to JavaScript that reads any property of any value: `ref.constructor`
 * is the Function constructor, and from there the process. A template may read only the allowed
 * attributes, named literally (`loop.last`, `x['items']`), or an element by a number.
 */
function checkTemplate(root) {
  const pending = [root];
  while (pending.length) {
    const node = pending.pop();
    if (!node || typeof node !== 'object') continue;
    if (node instanceof nunjucks.nodes.LookupVal) {
      const key = node.val;
      const literal = key instanceof nunjucks.nodes.Literal ? key.value : undefined;
      if (typeof literal === 'number') { /* an element by position */ }
      else if (typeof literal !== 'string') throw new Refused('a computed attribute name (x[expression]) is not rendered here');
      else if (!ALLOWED_ATTRIBUTES.has(literal)) throw new Refused(`the attribute "${literal}" is not rendered here (unknown macro or object)`);
    }
    if (node instanceof nunjucks.nodes.Symbol && FORBIDDEN_NAMES.has(node.value)) throw new Refused(`"${node.value}" is not rendered here`);
    if (node instanceof nunjucks.nodes.Include || node instanceof nunjucks.nodes.Extends || node instanceof nunjucks.nodes.Import || node instanceof nunjucks.nodes.FromImport) throw new Refused('include, extends and import are not rendered here');
    for (const value of Object.values(node)) {
      if (Array.isArray(value)) pending.push(...value);
      else if (value && typeof value === 'object') pending.push(value);
    }
  }
}

/** Positional arguments and keyword arguments of a call from a template (`f('a', b=1)`). */
function split(args) {
  const last = args.at(-1);
  if (last && typeof last === 'object' && last.__keywords) return { positional: args.slice(0, -1), keywords: last };
  return { positional: args, keywords: {} };
}

const quoted = (name) => `"${name}"`;
const { refs, sources } = workerData;

function render(model) {
  const read = new Set();
  const env = new nunjucks.Environment(null, { autoescape: false, throwOnUndefined: true });
  const context = {
    ref: (...args) => {
      const { positional, keywords } = split(args);
      const name = String(positional.length > 1 ? positional[1] : positional[0] ?? keywords.name);
      const pkg = positional.length > 1 ? String(positional[0]) : null;
      const candidates = refs.filter((r) => r.name === name && (pkg === null || r.package === pkg));
      const target = candidates.find((r) => r.package === model.packageName) ?? candidates[0];
      if (!target) throw new Refused(`ref('${name}') names no model, seed or snapshot of the manifest`);
      read.add(target.uniqueId);
      return quoted(target.dataset);
    },
    source: (sourceName, tableName) => {
      const target = sources.find((s) => s.source === String(sourceName) && s.table === String(tableName));
      if (!target) throw new Refused(`source('${sourceName}', '${tableName}') names no source of the manifest`);
      read.add(target.uniqueId);
      return quoted(target.dataset);
    },
    config: () => '',
    var: (...args) => {
      const { positional, keywords } = split(args);
      const fallback = positional.length > 1 ? positional[1] : keywords.default;
      if (fallback === undefined) throw new Refused(`var('${positional[0]}') has no value here (only a default given in the call is known)`);
      return fallback;
    },
    env_var: (name, fallback) => {
      if (fallback === undefined) throw new Refused(`env_var('${name}') has no value here`);
      return fallback;
    },
    is_incremental: () => false,
    this: quoted(model.dataset),
    range: (...args) => {
      const [start, stop, step = 1] = args.length === 1 ? [0, args[0]] : args;
      const count = Math.ceil((stop - start) / step);
      if (!(count <= MAX_RANGE)) throw new Refused(`range() of more than ${MAX_RANGE} values is not rendered here`);
      return Array.from({ length: Math.max(0, count) }, (_, i) => start + i * step);
    },
  };
  checkTemplate(nunjucks.parser.parse(model.rawCode, env.extensionsList, env.opts));
  const sql = env.renderString(model.rawCode, context);
  if (sql.length > MAX_OUTPUT) throw new Refused(`the rendered SQL is longer than ${MAX_OUTPUT} characters`);
  return { sql, reads: [...read] };
}

parentPort.on('message', (model) => {
  try {
    parentPort.postMessage({ uniqueId: model.uniqueId, ...render(model) });
  } catch (err) {
    // nunjucks wraps an error thrown by a call as "(unknown path) [Line 3, Column 8]\n  Error: …".
    const text = String(err?.message ?? err).replace(/\s+/g, ' ').trim();
    const [, where, message] = /^\(unknown path\)(?: \[(Line \d+, Column \d+)\])? (?:\w*Error: )?(.*)$/.exec(text) ?? [null, null, text];
    parentPort.postMessage({ uniqueId: model.uniqueId, error: `${message}${where ? ` (${where.toLowerCase()})` : ''}`.slice(0, 500) });
  }
});
