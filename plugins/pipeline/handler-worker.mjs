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

registerTypeScript();
register('../../kernel/registry/reload-hooks.mjs', import.meta.url, {
  data: { platformPackage: new URL('../../package.json', import.meta.url).href },
});

const { modulePath, exportName, params, datasets } = workerData;
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

async function* readRows(index) {
  const nextPage = () => request({ type: 'read', input: index });
  let pending = nextPage();
  for (;;) {
    const { rows } = await pending;
    if (!rows) return;
    pending = nextPage();
    yield* rows;
  }
}

/**
 * Output calls go out in order, at most this many unacknowledged at once: a handler that does not
 * await its writes queues them here (in its own, limited heap), not in the main thread.
 */
const OUTPUT_CALLS_IN_FLIGHT = 2;
const outbox = [];
let inFlight = 0;
/** Output calls not yet acknowledged: the handler may leave a write un-awaited, and the run waits for it. */
const unacknowledged = new Set();

function send(message) {
  const acknowledged = new Promise((resolve, reject) => {
    outbox.push({ message, resolve, reject });
    postOutbox();
  });
  unacknowledged.add(acknowledged);
  return acknowledged.finally(() => unacknowledged.delete(acknowledged));
}

function postOutbox() {
  while (inFlight < OUTPUT_CALLS_IN_FLIGHT && outbox.length > 0) {
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
    answered.then(() => {
      inFlight--;
      resolve();
      postOutbox();
    });
  }
}

function logLine(level) {
  return (message) => port.postMessage({ type: 'log', level, message: String(message) });
}

const ctx = {
  params,
  inputs: datasets.map((_, index) => inputOf(index)),
  output: {
    columns: (columns) => send({ type: 'columns', columns }),
    write: (rows) => send({ type: 'write', rows }),
  },
  // The main side stops a run by terminating this thread, so this signal never fires: it is there
  // for handlers written against the RecipeRun contract, which pass a signal on.
  signal: new AbortController().signal,
  log: { info: logLine('info'), warn: logLine('warn'), error: logLine('error') },
};

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
    await Promise.all(unacknowledged);
  } catch (err) {
    return { type: 'threw', message: messageOf(err) };
  }
  return { type: 'done' };
}

function messageOf(err) {
  return err instanceof Error ? err.message : String(err);
}

port.postMessage(await run());
