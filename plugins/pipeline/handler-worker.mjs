// The worker thread side of a recipe handler run (the main side is handler-runtime.ts, which also
// documents the messages). Plain JavaScript: this file runs before any TypeScript loader exists.
//
// The worker registers the module hooks the server process has (`--import tsx` and the hook that
// kernel/main.ts registers), because a worker does not inherit them: the handler's module may be
// TypeScript and may import `data-platform/plugin-api` or `data-platform/plugins/<id>` from a plugin
// folder anywhere. No `generation` query is needed: every run has a new worker, so a reloaded
// plugin's modules are read afresh.
import { register } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import { register as registerTypeScript } from 'tsx/esm/api';
import { rowFromColumns } from '../../storage/row-objects.mjs';
import { lowerThreadPriority } from '../../storage/thread-priority.mjs';

// A handler's work gives way to the request path when the CPU is short.
lowerThreadPriority();
registerTypeScript();
register('../../kernel/registry/reload-hooks.mjs', import.meta.url, {
  data: { platformPackage: new URL('../../package.json', import.meta.url).href },
});

const { modulePath, exportName, params, datasets, readAhead, outputCallsInFlight } = workerData;
const port = parentPort;

/** Requests awaiting the main side's answer, by id: page reads and output calls. */
const awaiting = new Map();
let lastId = 0;

port.on('message', (message) => {
  const settle = awaiting.get(message.id);
  awaiting.delete(message.id);
  settle?.(message);
});

/** Posts a request and resolves with the main side's answer to it. */
function request(message) {
  const id = ++lastId;
  const answered = new Promise((resolve) => awaiting.set(id, resolve));
  try {
    port.postMessage({ ...message, id });
  } catch (err) {
    awaiting.delete(id);
    throw err;
  }
  return answered;
}

/** The input's rows one by one; the page after the current one is fetched while the handler reads it. */
function inputOf(index) {
  let opened = false;
  return {
    dataset: datasets[index],
    rows() {
      if (opened) throw new Error(`the rows of input ${index} (${datasets[index].name}) can be read only once`);
      opened = true;
      return readRows(index);
    },
  };
}

/**
 * The input's rows: pages come by column (an array of values per column) and each row object is
 * built as the handler reaches it. Up to `readAhead` pages are asked for beyond the one being read.
 * An iterator written out rather than an async generator: within a page, `next` answers at once
 * (a generator costs about twice as much per row, which is most of a copy's time in this thread).
 * Calls of `next` made before the previous one settled are answered in order.
 */
function readRows(index) {
  const asked = [];
  let ended = false;
  let page = null;
  let row = 0;
  let pending = null;
  const askAhead = () => {
    while (!ended && asked.length < readAhead) asked.push(request({ type: 'read', input: index }));
  };
  const nextPage = async () => {
    for (;;) {
      if (asked.length === 0) return { done: true, value: undefined };
      const { columns, values, rows } = await asked.shift();
      if (!values) {
        ended = true;
        return { done: true, value: undefined };
      }
      askAhead();
      if (rows === 0) continue;
      // Every page of an input has the same columns: one maker serves them all.
      const key = columns.join('\u0000');
      page = { make: page?.key === key ? page.make : rowFromColumns(columns), key, values, rows };
      row = 1;
      return { done: false, value: page.make(values, 0) };
    }
  };
  askAhead();
  const iterator = {
    [Symbol.asyncIterator]: () => iterator,
    next() {
      if (pending) return pending.then(() => iterator.next());
      if (page && row < page.rows) return Promise.resolve({ done: false, value: page.make(page.values, row++) });
      pending = nextPage().finally(() => (pending = null));
      return pending;
    },
    return() {
      ended = true;
      page = null;
      asked.length = 0;
      return Promise.resolve({ done: true, value: undefined });
    },
  };
  return iterator;
}

/**
 * The handler's row objects by output column (an array of values per name of `names`), or null
 * when `rows` is not an array of row objects. A name an object inherits (toString, say) is read
 * only from the object's own properties, as copying the object would have.
 */
function valuesOf(rows, names) {
  if (!Array.isArray(rows)) return null;
  const count = rows.length;
  for (let r = 0; r < count; r++) {
    const row = rows[r];
    if (typeof row !== 'object' || row === null || Array.isArray(row)) return null;
  }
  return names.map((name) => {
    // Filled by push, not preallocated: a holey array is copied to the main thread element by element, a packed one at once.
    const values = [];
    if (name in Object.prototype) {
      for (let r = 0; r < count; r++) values.push(Object.prototype.propertyIsEnumerable.call(rows[r], name) ? rows[r][name] : undefined);
    } else {
      for (let r = 0; r < count; r++) values.push(rows[r][name]);
    }
    return values;
  });
}

/** The names of the output columns the handler declared (its first `output.columns`), once it did. */
let outputNames = null;

function declareColumns(columns) {
  if (outputNames === null) {
    try {
      outputNames = Array.isArray(columns) ? columns.map((column) => column?.name) : [];
    } catch {
      outputNames = []; // the main side refuses such columns anyway
    }
  }
  return send({ type: 'columns', columns });
}

function writeRows(rows) {
  let values = null;
  if (outputNames !== null) {
    try {
      values = valuesOf(rows, outputNames);
    } catch (err) {
      // A getter that throws, a revoked proxy and the like: the rows cannot be read, hence not copied.
      const problem = `output.write was given something that cannot be copied: ${messageOf(err)}`;
      port.postMessage({ type: 'invalid', message: problem });
      return Promise.reject(new Error(problem));
    }
  }
  return send({ type: 'write', values });
}

/**
 * Output calls go out in order, at most `outputCallsInFlight` unacknowledged at once. A call
 * resolves once it went out, not once the main side took it: the handler computes its next batch
 * while the main thread loads this one, and only a full window makes it wait (back-pressure). A
 * handler that does not await its writes queues them here (in its own, limited heap), not in the
 * main thread. Should the main side fail to take a batch, the run fails and this thread ends.
 */
const outbox = [];
let inFlight = 0;
/** Resolves the wait for the last acknowledgement (see `drained`). */
let onDrained = null;

function send(message) {
  return new Promise((resolve, reject) => {
    outbox.push({ message, resolve, reject });
    postOutbox();
  });
}

function postOutbox() {
  while (inFlight < outputCallsInFlight && outbox.length > 0) {
    const { message, resolve, reject } = outbox.shift();
    let answered;
    try {
      answered = request(message);
    } catch (err) {
      // A row holding a function, a symbol or the like cannot be copied to the main thread.
      const problem = `output.${message.type} was given something that cannot be copied: ${err.message}`;
      port.postMessage({ type: 'invalid', message: problem });
      reject(new Error(problem));
      continue;
    }
    inFlight++;
    resolve();
    answered.then(() => {
      inFlight--;
      postOutbox();
      if (inFlight === 0 && outbox.length === 0) onDrained?.();
    });
  }
}

/** Resolves once every output call went out and was acknowledged: the run ends (`done`) only then. */
function drained() {
  return inFlight === 0 && outbox.length === 0 ? Promise.resolve() : new Promise((resolve) => (onDrained = resolve));
}

function logLine(level) {
  return (message) => port.postMessage({ type: 'log', level, message: String(message) });
}

const ctx = {
  params,
  inputs: datasets.map((_, index) => inputOf(index)),
  output: {
    columns: declareColumns,
    write: writeRows,
  },
  // The main side stops a run by terminating this thread, so this signal never fires: it is there
  // for handlers written against the RecipeRun contract, which pass a signal on.
  signal: new AbortController().signal,
  log: { info: logLine('info'), warn: logLine('warn'), error: logLine('error') },
  call: callMain,
};

/** One of the type's `calls`, run on the main thread: resolves with its result, rejects with its error. */
async function callMain(name, arg) {
  const answer = await request({ type: 'call', name: String(name), arg });
  if ('error' in answer) throw new Error(answer.error);
  return answer.result;
}

async function run() {
  let module;
  try {
    module = await import(pathToFileURL(modulePath).href);
  } catch (err) {
    return { type: 'threw', message: `the handler's module cannot be imported: ${messageOf(err)}` };
  }
  const fn = module[exportName];
  if (typeof fn !== 'function') return { type: 'not_a_function', message: `the handler's module does not export a function named ${exportName}` };
  try {
    await fn(ctx);
    await drained();
  } catch (err) {
    return { type: 'threw', message: messageOf(err) };
  }
  return { type: 'done' };
}

function messageOf(err) {
  return err instanceof Error ? err.message : String(err);
}

port.postMessage(await run());
