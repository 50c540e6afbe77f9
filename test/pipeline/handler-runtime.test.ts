import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { OUTPUT_CALLS_IN_FLIGHT, READ_AHEAD_PAGES, runRecipeHandler, RecipeHandlerError, type HandlerInput, type HandlerRun } from '../../plugins/pipeline/handler-runtime.ts';
import { tempDir } from '../harness/index.ts';

// Handler modules as a plugin outside the repository would have them: no node_modules of its own,
// the SDK imported by its package specifier (inside the worker no vitest alias applies).
const TS_TYPES = `
export interface Ctx {
  params: unknown;
  inputs: { dataset: { columns: { name: string; type: string }[] }; rows(): AsyncIterable<Record<string, unknown>> }[];
  output: { columns(columns: { name: string; type: string }[]): Promise<void>; write(rows: Record<string, unknown>[]): Promise<void> };
}
`;

const TS_HANDLERS = `
import type { Ctx } from './types.ts';

export async function copy(ctx: Ctx): Promise<void> {
  const [input] = ctx.inputs;
  await ctx.output.columns(input.dataset.columns);
  let batch: Record<string, unknown>[] = [];
  for await (const row of input.rows()) {
    batch.push(row);
    if (batch.length === 500) {
      await ctx.output.write(batch);
      batch = [];
    }
  }
  if (batch.length > 0) await ctx.output.write(batch);
}
`;

const SDK_HANDLERS = `
import { z } from 'data-platform/plugin-api';
import { recipeType } from 'data-platform/plugins/pipeline';
import type { Ctx } from './types.ts';

const greetingParams = z.object({ name: z.string() });

export async function greet(ctx: Ctx): Promise<void> {
  const { name } = greetingParams.parse(ctx.params);
  await ctx.output.columns([{ name: 'greeting', type: 'string' }, { name: 'sdk', type: 'string' }]);
  await ctx.output.write([{ greeting: 'hello ' + name, sdk: typeof recipeType }]);
}
`;

const JS_HANDLERS = `
export async function zip(ctx) {
  await ctx.output.columns([{ name: 'left', type: 'integer' }, { name: 'right', type: 'integer' }]);
  const right = ctx.inputs[1].rows()[Symbol.asyncIterator]();
  for await (const row of ctx.inputs[0].rows()) {
    const other = await right.next();
    await ctx.output.write([{ left: row.n, right: other.done ? null : other.value.n }]);
  }
}

export async function describeRows(ctx) {
  await ctx.output.columns([{ name: 'keys', type: 'string' }, { name: 'proto', type: 'string' }, { name: 'plain', type: 'boolean' }]);
  for await (const row of ctx.inputs[0].rows()) {
    await ctx.output.write([{ keys: Object.keys(row).join(','), proto: String(row.__proto__), plain: Object.getPrototypeOf(row) === Object.prototype }]);
  }
}

export async function nextAtOnce(ctx) {
  await ctx.output.columns([{ name: 'n', type: 'integer' }]);
  const rows = ctx.inputs[0].rows()[Symbol.asyncIterator]();
  const results = await Promise.all(Array.from({ length: 2502 }, () => rows.next()));
  await ctx.output.write(results.map((result) => ({ n: result.done ? -1 : result.value.n })));
}

export async function writeWithoutAwaiting(ctx) {
  await ctx.output.columns([{ name: 'n', type: 'integer' }]);
  const writes = [];
  for (let batch = 0; batch < 40; batch++) writes.push(ctx.output.write(Array.from({ length: 100 }, (_, i) => ({ n: batch * 100 + i }))));
}

export async function throws() {
  throw new Error('the handler broke on purpose');
}

export async function hangs() {
  await new Promise(() => {});
}

export function spins() {
  for (;;) {}
}

export function exits() {
  process.exit(3);
}

export function eatsMemory() {
  const hoard = [];
  for (;;) hoard.push(new Array(1_000_000).fill(Math.random()));
}

export async function logs(ctx) {
  ctx.log.info('starting');
  ctx.log.warn('careful');
  ctx.log.error('oops');
  console.log('printed');
  await ctx.output.columns([{ name: 'n', type: 'integer' }]);
}

export async function writesBeforeColumns(ctx) {
  await ctx.output.write([{ n: 1 }]);
}
export async function columnsTwice(ctx) {
  await ctx.output.columns([{ name: 'n', type: 'integer' }]);
  await ctx.output.columns([{ name: 'n', type: 'integer' }]);
}
export async function columnsNotAnArray(ctx) {
  await ctx.output.columns({ n: 'integer' });
}
export async function unknownColumnType(ctx) {
  await ctx.output.columns([{ name: 'n', type: 'bigint' }]);
}
export async function noColumns() {}
export async function writesNotAnArray(ctx) {
  await ctx.output.columns([{ name: 'n', type: 'integer' }]);
  await ctx.output.write({ n: 1 });
}
export async function writesAFunction(ctx) {
  await ctx.output.columns([{ name: 'n', type: 'integer' }]);
  await ctx.output.write([{ n: () => 1 }]);
}
export const notAFunction = 42;
`;

let fixtures: ReturnType<typeof tempDir>;
let tsModule: string;
let jsModule: string;
let sdkModule: string;

beforeAll(() => {
  fixtures = tempDir('dp-recipe-handlers-');
  fs.writeFileSync(path.join(fixtures.dir, 'package.json'), JSON.stringify({ type: 'module' }));
  tsModule = path.join(fixtures.dir, 'handlers.ts');
  jsModule = path.join(fixtures.dir, 'handlers.mjs');
  sdkModule = path.join(fixtures.dir, 'sdk-handlers.ts');
  fs.writeFileSync(path.join(fixtures.dir, 'types.ts'), TS_TYPES);
  fs.writeFileSync(tsModule, TS_HANDLERS);
  fs.writeFileSync(sdkModule, SDK_HANDLERS);
  fs.writeFileSync(jsModule, JS_HANDLERS);
});
afterAll(() => fixtures.remove());
afterEach(() => vi.restoreAllMocks());

const COLUMNS = [
  { name: 'n', type: 'integer' },
  { name: 'label', type: 'string' },
];

/** An input of `count` rows `{ n, label }` in pages of `pageSize`; `pagesRead` counts the pages handed out, `closed` tells whether its reader was released. */
function numbers(count: number, pageSize = 1000, name = 'numbers') {
  const state = { pagesRead: 0, closed: false };
  const input: HandlerInput = {
    dataset: { id: 1, name, columns: COLUMNS },
    async *pages() {
      try {
        for (let start = 0; start < count; start += pageSize) {
          state.pagesRead++;
          const rows = Math.min(pageSize, count - start);
          const n = Array.from({ length: rows }, (_, i) => start + i);
          yield { columns: ['n', 'label'], values: [n, n.map((i) => `row ${i}`)], rows };
        }
      } finally {
        state.closed = true;
      }
    },
  };
  return Object.assign(state, { input });
}

/** An output that keeps what it is given, as row objects (or only counts the rows, with `keepRows: false`). */
function collector({ keepRows = true, writeDelayMs = 0 } = {}) {
  const taken = { columns: [] as { name: string; type: string }[][], rows: [] as Record<string, unknown>[], rowCount: 0, writes: 0 };
  const output: HandlerRun['output'] = {
    async columns(columns) {
      taken.columns.push(columns);
    },
    async write(values) {
      taken.writes++;
      if (writeDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, writeDelayMs));
      const count = values[0].length;
      taken.rowCount += count;
      const names = taken.columns[0].map((c) => c.name);
      if (keepRows) for (let r = 0; r < count; r++) taken.rows.push(Object.fromEntries(names.map((name, i) => [name, values[i][r]])));
    },
  };
  return Object.assign(taken, { output });
}

function handlerRun(modulePath: string, exportName: string, fields: Partial<HandlerRun> = {}): HandlerRun {
  return { modulePath, exportName, params: {}, inputs: [], output: collector().output, signal: new AbortController().signal, timeoutMs: 20_000, log: () => undefined, ...fields };
}

async function failureOf(run: Promise<unknown>): Promise<RecipeHandlerError> {
  const error = await run.then(
    () => expect.fail('the run should have failed'),
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(RecipeHandlerError);
  return error as RecipeHandlerError;
}

describe('runRecipeHandler', () => {
  it('copies 10 000 rows read in pages of 1000 through a TypeScript handler, in order', async () => {
    const source = numbers(10_000);
    const target = collector();
    const result = await runRecipeHandler(handlerRun(tsModule, 'copy', { inputs: [source.input], output: target.output }));
    expect(result).toEqual({ rows: 10_000 });
    expect(target.columns).toEqual([COLUMNS]);
    expect(target.rows.map((row) => row.n)).toEqual(Array.from({ length: 10_000 }, (_, i) => i));
    expect(target.rows[9_999]).toEqual({ n: 9_999, label: 'row 9999' });
    expect(source.pagesRead).toBe(10);
  });

  it('imports the SDK and another plugin\u2019s public module by their package specifiers inside the worker', async () => {
    const target = collector();
    await runRecipeHandler(handlerRun(sdkModule, 'greet', { params: { name: 'Ada' }, output: target.output }));
    expect(target.rows).toEqual([{ greeting: 'hello Ada', sdk: 'function' }]);
  });

  it('hands the handler rows with own keys only: a column named __proto__ or toString is a value like any other', async () => {
    const input: HandlerInput = {
      dataset: { id: 1, name: 'odd_names', columns: [{ name: '__proto__', type: 'string' }, { name: 'toString', type: 'string' }] },
      async *pages() {
        yield { columns: ['__proto__', 'toString'], values: [['p1', 'p2'], ['t1', 't2']], rows: 2 };
        yield { columns: ['__proto__', 'toString'], values: [['p3'], ['t3']], rows: 1 };
      },
    };
    const target = collector();
    await runRecipeHandler(handlerRun(jsModule, 'describeRows', { inputs: [input], output: target.output }));
    expect(target.rows).toEqual(['p1', 'p2', 'p3'].map((proto) => ({ keys: '__proto__,toString', proto, plain: true })));
  });

  it('answers calls of next made at once in order, across pages, then done', async () => {
    const target = collector();
    await runRecipeHandler(handlerRun(jsModule, 'nextAtOnce', { inputs: [numbers(2500).input], output: target.output }));
    expect(target.rows.map((row) => row.n)).toEqual([...Array.from({ length: 2500 }, (_, i) => i), -1, -1]);
  });

  it('reads two inputs side by side', async () => {
    const target = collector();
    const result = await runRecipeHandler(handlerRun(jsModule, 'zip', { inputs: [numbers(5, 2).input, numbers(3, 2, 'short').input], output: target.output }));
    expect(result).toEqual({ rows: 5 });
    expect(target.rows).toEqual([
      { left: 0, right: 0 },
      { left: 1, right: 1 },
      { left: 2, right: 2 },
      { left: 3, right: null },
      { left: 4, right: null },
    ]);
  });

  describe('back-pressure', () => {
    /** Counts, from the worker's messages and the main side's answers, the output calls posted and not yet acknowledged. */
    function watchUnacknowledgedWrites() {
      const watch = { unacknowledged: 0, most: 0 };
      const writeIds = new Set<number>();
      const emit = Worker.prototype.emit;
      vi.spyOn(Worker.prototype, 'emit').mockImplementation(function (this: Worker, event, ...args) {
        const message = args[0] as { type?: string; id?: number } | undefined;
        if (event === 'message' && message?.type === 'write') {
          writeIds.add(message.id!);
          watch.most = Math.max(watch.most, writeIds.size);
        }
        return emit.call(this, event, ...args);
      });
      const postMessage = Worker.prototype.postMessage;
      vi.spyOn(Worker.prototype, 'postMessage').mockImplementation(function (this: Worker, message: { id?: number }) {
        writeIds.delete(message.id!);
        return postMessage.call(this, message);
      });
      return watch;
    }

    it(`paces reading to a slow output: at most ${OUTPUT_CALLS_IN_FLIGHT} writes unacknowledged, input read at most ${READ_AHEAD_PAGES} pages ahead`, async () => {
      const watch = watchUnacknowledgedWrites();
      const source = numbers(10_000);
      let mostPagesAhead = 0;
      const target = collector({ keepRows: false, writeDelayMs: 20 });
      const write = target.output.write;
      target.output.write = async (rows) => {
        // Pages handed out beyond the rows acknowledged: the one being read, those asked ahead, and the
        // batches of 500 rows in flight (this one among them).
        mostPagesAhead = Math.max(mostPagesAhead, source.pagesRead - Math.floor(target.rowCount / 1000));
        await write(rows);
      };
      await runRecipeHandler(handlerRun(tsModule, 'copy', { inputs: [source.input], output: target.output }));
      expect(target.rowCount).toBe(10_000);
      expect(watch.most).toBeGreaterThanOrEqual(1);
      expect(watch.most).toBeLessThanOrEqual(OUTPUT_CALLS_IN_FLIGHT);
      expect(mostPagesAhead).toBeLessThanOrEqual(1 + READ_AHEAD_PAGES + Math.ceil((OUTPUT_CALLS_IN_FLIGHT * 500) / 1000));
    });

    it('holds back the writes of a handler that does not await them; the run waits for every one', async () => {
      const watch = watchUnacknowledgedWrites();
      const target = collector({ writeDelayMs: 5 });
      const result = await runRecipeHandler(handlerRun(jsModule, 'writeWithoutAwaiting', { output: target.output }));
      expect(result).toEqual({ rows: 4_000 });
      expect(target.rows.map((row) => row.n)).toEqual(Array.from({ length: 4_000 }, (_, i) => i));
      expect(watch.most).toBe(OUTPUT_CALLS_IN_FLIGHT);
    });
  });

  describe('a handler that fails', () => {
    it('throws: the run fails with its message', async () => {
      const error = await failureOf(runRecipeHandler(handlerRun(jsModule, 'throws')));
      expect(error.reason).toBe('threw');
      expect(error.message).toBe('the handler broke on purpose');
    });

    it('never settles: the run times out', async () => {
      const started = Date.now();
      const error = await failureOf(runRecipeHandler(handlerRun(jsModule, 'hangs', { timeoutMs: 1000 })));
      expect(error.reason).toBe('timeout');
      expect(error.message).toBe('the handler ran longer than 1 s');
      expect(Date.now() - started).toBeLessThan(2000);
    });

    it('spins: the run times out and the main thread keeps running meanwhile', async () => {
      let ticks = 0;
      const ticking = setInterval(() => ticks++, 50);
      try {
        const error = await failureOf(runRecipeHandler(handlerRun(jsModule, 'spins', { timeoutMs: 1500 })));
        expect(error.reason).toBe('timeout');
      } finally {
        clearInterval(ticking);
      }
      expect(ticks).toBeGreaterThanOrEqual(15);
    });

    it('calls process.exit: the run fails as exited, the server process lives on', async () => {
      const error = await failureOf(runRecipeHandler(handlerRun(jsModule, 'exits')));
      expect(error.reason).toBe('exited');
      expect(error.message).toBe('the handler exited (code 3) before it finished');
    });

    it('eats memory past its limit: the run fails, the server process lives on', async () => {
      const error = await failureOf(runRecipeHandler(handlerRun(jsModule, 'eatsMemory', { memoryLimitMb: 64 })));
      expect(error.reason).toBe('out_of_memory');
      expect(error.message).toBe('the handler ran out of memory (limit 64 MB)');
      await expect(runRecipeHandler(handlerRun(tsModule, 'copy', { inputs: [numbers(10).input] }))).resolves.toEqual({ rows: 10 });
    });

    it.each([
      ['writesBeforeColumns', 'output.write was called before output.columns'],
      ['columnsTwice', 'output.columns was called more than once'],
      ['columnsNotAnArray', 'output.columns expects a non-empty array of { name, type }'],
      ['unknownColumnType', 'output column "n" has unknown type "bigint" (one of string, integer, number, boolean, date, timestamp, json)'],
      ['noColumns', 'the handler wrote no output columns'],
      ['writesNotAnArray', 'output.write expects an array of row objects'],
      ['writesAFunction', expect.stringMatching(/^output\.write was given something that cannot be copied: /)],
    ])('gives invalid output (%s): the run fails naming the problem', async (exportName, message) => {
      const error = await failureOf(runRecipeHandler(handlerRun(jsModule, exportName)));
      expect(error.reason).toBe('invalid_output');
      expect(error.message).toEqual(message);
    });

    it('is no function: the run fails as not_a_function', async () => {
      const error = await failureOf(runRecipeHandler(handlerRun(jsModule, 'notAFunction')));
      expect(error.reason).toBe('not_a_function');
      expect(error.message).toBe("the handler's module does not export a function named notAFunction");
    });
  });

  it('stops promptly when aborted mid-stream, with the signal\u2019s reason, and releases the input', async () => {
    const source = numbers(100_000);
    const controller = new AbortController();
    const target = collector({ keepRows: false });
    const write = target.output.write;
    target.output.write = async (rows) => {
      await write(rows);
      if (target.writes === 3) controller.abort(new Error('cancelled by the user'));
    };
    const started = Date.now();
    await expect(runRecipeHandler(handlerRun(tsModule, 'copy', { inputs: [source.input], output: target.output, signal: controller.signal }))).rejects.toThrow(
      'cancelled by the user',
    );
    expect(Date.now() - started).toBeLessThan(5000);
    expect(target.rowCount).toBeLessThan(100_000);
    await vi.waitFor(() => expect(source.closed).toBe(true));
  });

  it('passes on the lines the handler logs and prints', async () => {
    const lines: [string, string][] = [];
    await runRecipeHandler(handlerRun(jsModule, 'logs', { log: (level, message) => lines.push([level, message]) }));
    await vi.waitFor(() => expect(lines).toContainEqual(['info', 'printed']));
    expect(lines).toEqual(expect.arrayContaining([['info', 'starting'], ['warn', 'careful'], ['error', 'oops']]));
  });

  it('copies 200 000 rows with the main process\u2019s memory flat', async () => {
    const source = numbers(200_000);
    const target = collector({ keepRows: false });
    global.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const write = target.output.write;
    target.output.write = async (rows) => {
      peak = Math.max(peak, process.memoryUsage().rss);
      await write(rows);
    };
    await expect(runRecipeHandler(handlerRun(tsModule, 'copy', { inputs: [source.input], output: target.output }))).resolves.toEqual({ rows: 200_000 });
    // Loose: the worker's own heap is part of this process's RSS, and the machine is shared.
    expect(peak - before).toBeLessThan(150 * 1024 * 1024);
  });

  it('leaves nothing that keeps the process alive once a run has ended, finished or failed', async () => {
    const runtime = fileURLToPath(new URL('../../plugins/pipeline/handler-runtime.ts', import.meta.url));
    const script = `
      import { runRecipeHandler } from ${JSON.stringify(runtime)};
      const run = (exportName, timeoutMs) => runRecipeHandler({
        modulePath: ${JSON.stringify(jsModule)}, exportName, timeoutMs, params: {}, inputs: [], log: () => {},
        output: { columns: async () => {}, write: async () => {} }, signal: new AbortController().signal,
      });
      await run('logs', 20000);
      await run('hangs', 500).catch((err) => console.log(err.reason));
      await run('spins', 500).catch((err) => console.log(err.reason));
    `;
    const child = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { timeout: 15_000 });
    expect(child.stdout).toBe('timeout\ntimeout\n');
  });
});
