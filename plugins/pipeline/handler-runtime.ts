/**
 * Runs a manifest's recipe handler (`module:function`) in a worker thread of its own, so that a
 * handler that throws, hangs, spins, exits or eats memory fails its run with a reason and leaves
 * the server running. Rows stream both ways in batches with back-pressure: the worker asks for an
 * input's pages as its handler reads (at most `READ_AHEAD_PAGES` asked and not yet read), and at
 * most `OUTPUT_CALLS_IN_FLIGHT` of its output calls wait for the main side's `output` to take them,
 * so memory does not follow the size of a dataset.
 *
 * Rows cross between the threads by column, an array of values per column (far cheaper to copy
 * than an object per row): an input's pages by their `columns`, the output's batches by the
 * declared output columns. The worker builds the row objects its handler reads, one by one as it
 * reads them, and takes apart the row objects its handler writes.
 *
 * Messages (structured clone), worker → main: `read` (an input's next page), `columns` and `write`
 * (answered once the output took them; `values` null when the handler's rows were no array of row
 * objects or came before the columns), `call` (one of the type's `calls`, answered with its
 * `result` or `error`), `log`, `invalid` (output that cannot be copied), and last
 * one of `done`, `threw`, `not_a_function`. Main → worker: the answer to a request, by its id.
 */
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { Worker } from 'node:worker_threads';

/** A page of an input, by column: `values[i][r]` is the value of `columns[i]` in row `r` (the handler sees `{ [column]: value }` objects). */
export interface HandlerPage {
  columns: string[];
  values: unknown[][];
  rows: number;
}

export interface HandlerInput {
  dataset: { id: number; name: string; columns: { name: string; type: string }[] };
  /**
   * Pages of rows in dataset order, read by the main thread on demand (as the worker asks, at most
   * `READ_AHEAD_PAGES` ahead of the page its handler reads); `next` may be called again before
   * the previous call settled (an async generator queues the calls).
   */
  pages(): AsyncIterable<HandlerPage>;
}

export interface HandlerOutput {
  /** Called once, before the first write, with the output columns (type one of string, integer, number, boolean, date, timestamp, json). */
  columns(columns: { name: string; type: string }[]): Promise<void>;
  /**
   * One batch of rows, by column: an array of values per declared column, in their order, all of
   * one length (a property the handler's row object lacks is undefined). The worker acknowledges
   * a batch once this resolved; with `OUTPUT_CALLS_IN_FLIGHT` unacknowledged, its `write` waits
   * (back-pressure). A rejection fails the run with that error.
   */
  write(values: unknown[][]): Promise<void>;
}

export interface HandlerRun {
  /** Absolute path of the handler's module, and the exported function's name. */
  modulePath: string;
  exportName: string;
  params: unknown;
  inputs: HandlerInput[];
  output: HandlerOutput;
  /** Aborting stops the handler: the worker is terminated; the run rejects with the signal's reason. */
  signal: AbortSignal;
  /** Past it the worker is terminated and the run rejects with a RecipeHandlerError (reason 'timeout'). */
  timeoutMs: number;
  /** The worker's heap limit (`resourceLimits.maxOldGenerationSizeMb`); past it the run fails with 'out_of_memory'. Default 256. */
  memoryLimitMb?: number;
  /** The functions the handler may call on this thread (`ctx.call(name, arg)`). */
  calls?: Record<string, (arg: unknown) => Promise<unknown>>;
  /** Lines the handler logs through ctx.log (level info|warn|error), and what it prints to stdout (info) or stderr (warn). */
  log(level: 'info' | 'warn' | 'error', message: string): void;
}

export type RecipeHandlerFailure = 'threw' | 'timeout' | 'exited' | 'out_of_memory' | 'invalid_output' | 'not_a_function';

export class RecipeHandlerError extends Error {
  override readonly name = 'RecipeHandlerError';

  constructor(
    readonly reason: RecipeHandlerFailure,
    message: string,
  ) {
    super(message);
  }
}

export const OUTPUT_COLUMN_TYPES = ['string', 'integer', 'number', 'boolean', 'date', 'timestamp', 'json'] as const;

const DEFAULT_MEMORY_LIMIT_MB = 256;
/** Pages of an input the worker asks for ahead of the one its handler reads (the next ones are read meanwhile). */
export const READ_AHEAD_PAGES = 3;
/**
 * Output calls of the worker posted and not yet acknowledged: a handler that does not await its
 * writes queues the rest in the worker (in its own, limited heap), not in the main thread.
 */
export const OUTPUT_CALLS_IN_FLIGHT = 4;
const WORKER_MODULE = new URL('./handler-worker.mjs', import.meta.url);

type WorkerMessage =
  | { type: 'read'; id: number; input: number }
  | { type: 'columns'; id: number; columns: unknown }
  | { type: 'write'; id: number; values: unknown }
  | { type: 'call'; id: number; name: string; arg: unknown }
  | { type: 'log'; level: 'info' | 'warn' | 'error'; message: string }
  | { type: 'invalid' | 'threw' | 'not_a_function'; message: string }
  | { type: 'done' };

/** Runs the handler to its end; resolves once it returned and every write was acknowledged. */
export function runRecipeHandler(run: HandlerRun): Promise<{ rows: number }> {
  if (run.signal.aborted) return Promise.reject(run.signal.reason);
  return new Promise((resolve, reject) => {
    const memoryLimitMb = run.memoryLimitMb ?? DEFAULT_MEMORY_LIMIT_MB;
    const worker = new Worker(WORKER_MODULE, {
      workerData: {
        modulePath: run.modulePath,
        exportName: run.exportName,
        params: run.params,
        datasets: run.inputs.map((input) => input.dataset),
        readAhead: READ_AHEAD_PAGES,
        outputCallsInFlight: OUTPUT_CALLS_IN_FLIGHT,
      },
      // Not the server's own flags (`--import tsx` would load tsx twice): the worker registers its hooks itself.
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: memoryLimitMb },
      stdout: true,
      stderr: true,
    });
    forwardLines(worker.stdout, (line) => run.log('info', line));
    forwardLines(worker.stderr, (line) => run.log('warn', line));

    const readers: (AsyncIterator<HandlerPage> | undefined)[] = run.inputs.map(() => undefined);
    let settled = false;
    let rows = 0;
    let columnsGiven = false;
    let width = 0;
    // Output calls and the end are handled in the order the worker sent them, one at a time.
    let outputDone: Promise<void> = Promise.resolve();

    const end = () => {
      settled = true;
      clearTimeout(timer);
      run.signal.removeEventListener('abort', onAbort);
      worker.unref();
      void worker.terminate();
      // Lets a reader the handler did not finish release what it holds (a database cursor, say).
      for (const reader of readers) reader?.return?.().catch(() => undefined);
    };
    const fail = (error: unknown) => {
      if (settled) return;
      end();
      reject(error);
    };
    const invalid = (problem: string) => fail(new RecipeHandlerError('invalid_output', problem));
    const onAbort = () => fail(run.signal.reason);
    run.signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => fail(new RecipeHandlerError('timeout', `the handler ran longer than ${run.timeoutMs / 1000} s`)), run.timeoutMs);

    const readPage = async (id: number, input: number) => {
      const reader = (readers[input] ??= run.inputs[input].pages()[Symbol.asyncIterator]());
      const page = await reader.next();
      if (!settled) worker.postMessage(page.done ? { id, values: null } : { id, columns: page.value.columns, values: page.value.values, rows: page.value.rows });
    };

    const takeOutput = async (message: Extract<WorkerMessage, { type: 'columns' | 'write' | 'done' }>) => {
      if (settled) return;
      if (message.type === 'done') {
        if (!columnsGiven) return invalid('the handler wrote no output columns');
        end();
        return resolve({ rows });
      }
      if (message.type === 'columns') {
        if (columnsGiven) return invalid('output.columns was called more than once');
        const problem = columnsProblem(message.columns);
        if (problem) return invalid(problem);
        columnsGiven = true;
        width = (message.columns as unknown[]).length;
        await run.output.columns((message.columns as { name: string; type: string }[]).map(({ name, type }) => ({ name, type })));
      } else {
        if (!columnsGiven) return invalid('output.write was called before output.columns');
        if (!isBatch(message.values, width)) return invalid('output.write expects an array of row objects');
        await run.output.write(message.values);
        rows += message.values[0].length;
      }
      if (!settled) worker.postMessage({ id: message.id });
    };

    const call = async ({ id, name, arg }: Extract<WorkerMessage, { type: 'call' }>) => {
      const fn = Object.hasOwn(run.calls ?? {}, name) ? run.calls![name] : undefined;
      let answer: { result: unknown } | { error: string };
      try {
        if (!fn) throw new Error(`the recipe type offers no call "${name}"`);
        answer = { result: await fn(arg) };
      } catch (err) {
        answer = { error: (err as Error)?.message ?? String(err) };
      }
      if (!settled) worker.postMessage({ id, ...answer });
    };

    worker.on('message', (message: WorkerMessage) => {
      switch (message.type) {
        case 'read':
          return void readPage(message.id, message.input).catch(fail);
        case 'call':
          return void call(message).catch(fail);
        case 'columns':
        case 'write':
        case 'done':
          outputDone = outputDone.then(() => takeOutput(message)).catch(fail);
          return;
        case 'log':
          return run.log(message.level, message.message);
        case 'invalid':
          return invalid(message.message);
        case 'threw':
        case 'not_a_function':
          return fail(new RecipeHandlerError(message.type, message.message));
      }
    });
    worker.on('messageerror', (err) => invalid(`a message from the handler cannot be read: ${err.message}`));
    worker.on('error', (err: Error & { code?: string }) => {
      if (err.code === 'ERR_WORKER_OUT_OF_MEMORY') fail(new RecipeHandlerError('out_of_memory', `the handler ran out of memory (limit ${memoryLimitMb} MB)`));
      else fail(new RecipeHandlerError('exited', `the handler stopped on an uncaught error: ${err.message}`));
    });
    worker.on('exit', (code) => fail(new RecipeHandlerError('exited', `the handler exited (code ${code}) before it finished`)));
  });
}

/** Why `columns` is not a valid list of output columns, or undefined when it is. */
function columnsProblem(columns: unknown): string | undefined {
  if (!Array.isArray(columns) || columns.length === 0) return 'output.columns expects a non-empty array of { name, type }';
  const names = new Set<string>();
  for (const column of columns as { name?: unknown; type?: unknown }[]) {
    const name = column?.name;
    if (typeof name !== 'string' || name === '') return 'every output column needs a name (a non-empty string)';
    if (names.has(name)) return `output column "${name}" is named twice`;
    names.add(name);
    if (!(OUTPUT_COLUMN_TYPES as readonly unknown[]).includes(column.type)) {
      return `output column "${name}" has unknown type ${JSON.stringify(column.type)} (one of ${OUTPUT_COLUMN_TYPES.join(', ')})`;
    }
  }
  return undefined;
}

/** A batch as the worker sends it: `width` arrays of values of one length (null: the handler's rows were no array of row objects). */
function isBatch(values: unknown, width: number): values is unknown[][] {
  return Array.isArray(values) && values.length === width && values.every((column) => Array.isArray(column) && column.length === values[0].length);
}

/** Calls `take` with each line the worker prints (a handler's console output belongs in its run's log). */
function forwardLines(stream: Readable, take: (line: string) => void) {
  createInterface({ input: stream, crlfDelay: Infinity }).on('line', take);
}
