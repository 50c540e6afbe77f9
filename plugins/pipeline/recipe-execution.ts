import { problems, type Principal } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import { PII_MASK, ROWS_STREAM_PAGE_MAX, type DatasetCatalog, type DatasetInfo } from '../datasets/public.ts';
import { BatchChannel } from './batch-channel.ts';
import { RecipeHandlerError, runRecipeHandler } from './handler-runtime.ts';
import { checkCounts, type RecipePlanning } from './planning.ts';
import type { OfferedRecipeType, RecipeTypeCatalog } from './public.ts';
import type { Recipe } from './recipe-store.ts';

/** What running a recipe needs besides the recipe: who runs it, how to stop it, where to log. */
export interface ExecutionContext {
  principal: Principal;
  /** The run it is for. */
  runId?: number;
  signal: AbortSignal;
  timeoutMs: number;
  log(level: 'info' | 'warn' | 'error', message: string): void;
}

export interface ExecutionResult {
  rows: number;
  /** The version of each input read (dataset id → version). */
  inputVersions: Record<string, number>;
}

/**
 * Runs one recipe: a planned type as one `INSERT … SELECT` per output, in the database, through
 * governed SQL; a handler type in a worker thread, its rows streamed from and to the database.
 * Either way every output is written to a staging table and all are swapped in at once: a failed
 * or stopped run leaves every output as it was.
 */
export class RecipeExecution {
  constructor(
    private readonly storage: Storage,
    private readonly catalog: DatasetCatalog,
    private readonly types: RecipeTypeCatalog,
    private readonly planning: RecipePlanning,
  ) {}

  /** The type, offered in the organization, and the params checked against it; else a 4xx naming which. */
  async typeFor(orgId: number, typeId: string, params: unknown): Promise<OfferedRecipeType> {
    const type = await this.types.get(orgId, typeId);
    if (!type) throw problems.unprocessable(`recipe type "${typeId}" is not offered in this organization (unknown, or its plugin is disabled here)`, [{ path: 'body.type', message: `unknown recipe type ${typeId}` }]);
    const errors = type.check(params);
    if (errors.length) throw problems.badRequest('params do not match the recipe type', errors);
    return type;
  }

  async run(recipe: Recipe, context: ExecutionContext): Promise<ExecutionResult> {
    const type = await this.typeFor(recipe.org_id, recipe.type, recipe.params);
    const inputs = await this.planning.datasets(recipe.org_id, recipe.inputs, 'inputs');
    const outputs = await this.planning.datasets(recipe.org_id, recipe.outputs, 'outputs');
    const inputVersions = Object.fromEntries(inputs.map((d) => [String(d.id), d.version]));
    context.log('info', `reading ${inputs.map((d) => `"${d.name}" (version ${d.version})`).join(', ')}`);
    const rows = type.plan ? await this.runPlanned(type, recipe, inputs, outputs, context) : await this.runHandler(type, recipe, inputs, outputs[0], context);
    return { rows, inputVersions };
  }

  private async runPlanned(type: OfferedRecipeType, recipe: Recipe, inputs: DatasetInfo[], outputs: DatasetInfo[], context: ExecutionContext): Promise<number> {
    const datasets = await this.planning.governed(context.principal, inputs);
    const planned = await this.planning.plan(type, recipe.params, context.principal, inputs, outputs.length, datasets);
    const statements = await Promise.all(planned.map((output) => this.planning.checked(output.sql, datasets)));
    let swapping = 0;
    const written = await this.catalog.replace(
      outputs.map((dataset, i) => ({ dataset, columns: planned[i].columns })),
      async (staging) => {
        const counts: number[] = [];
        // One output after another: each statement is the database's work, not this process's.
        for (const [i, table] of staging.entries()) {
          const started = performance.now();
          const { rows } = await this.storage.writeGoverned({ sql: statements[i], params: [], orgId: recipe.org_id, datasets, mask: PII_MASK, timeoutMs: context.timeoutMs, target: table, columns: planned[i].columns, signal: context.signal });
          context.log('info', `computed ${rows} rows for "${outputs[i].name}" in ${Math.round(performance.now() - started)} ms`);
          counts.push(rows);
        }
        swapping = performance.now();
        return counts;
      },
    );
    context.log('info', `swapped ${outputs.length === 1 ? 'the output' : `${outputs.length} outputs`} in (${Math.round(performance.now() - swapping)} ms)`);
    return written.reduce((sum, { rows }) => sum + rows, 0);
  }

  /**
   * A handler type: its inputs are streamed page by page as the run's principal may read them (row
   * policies apply), its output rows checked against the columns it declared and loaded as an
   * upload is: into a staging table swapped in once the handler returned.
   */
  private async runHandler(type: OfferedRecipeType, recipe: Recipe, inputs: DatasetInfo[], output: DatasetInfo, context: ExecutionContext): Promise<number> {
    checkCounts(type, inputs.length, 1);
    this.planning.refusePii(context.principal, inputs);
    // Checked batches may wait for the loader while the next ones are checked: the handler's thread and the database work meanwhile.
    const channel = new BatchChannel<unknown[][]>(OUTPUT_BATCHES_AHEAD);
    let columns: { name: string; type: DatasetInfo['columns'][number]['type'] }[] = [];
    let loading = null as Promise<{ loaded: number }> | null;
    try {
      await runRecipeHandler({
        modulePath: type.handler!.modulePath,
        exportName: type.handler!.exportName,
        params: recipe.params,
        inputs: inputs.map((dataset) => ({
          dataset: { id: dataset.id, name: dataset.name, columns: dataset.columns.map((c) => ({ name: c.name, type: c.type })) },
          pages: () => this.catalog.stream(context.principal, dataset.org_id, dataset.id, { pageSize: pageSizeOf(dataset) }),
        })),
        output: {
          columns: async (declared) => {
            columns = declared as typeof columns;
            // What a handler computes from which column is unknown: with any PII input, every
            // output column is PII (an owner holding datasets.pii.read may unflag what is not).
            const pii = inputs.some((d) => d.columns.some((c) => c.pii));
            loading = this.catalog.load(output, columns.map((c) => ({ ...c, pii })), channel, 'replace');
            loading.catch(() => undefined); // awaited below; a failure also ends the channel's pushes
          },
          write: async (values) => channel.push(this.rowsOf(columns, values)),
        },
        signal: context.signal,
        timeoutMs: context.timeoutMs,
        calls: type.handler!.calls?.({ orgId: recipe.org_id, projectId: recipe.project_id, principal: context.principal, params: recipe.params, inputs, runId: context.runId }),
        log: context.log,
      });
      channel.end();
      if (!loading) throw new RecipeHandlerError('invalid_output', 'the handler wrote no output columns');
      return (await loading).loaded;
    } catch (err) {
      channel.fail(err as Error);
      await Promise.resolve(loading).catch(() => undefined);
      throw err;
    }
  }

  /**
   * A batch of the handler's output, by column (`values[j]` the values of `columns[j]`), as rows of
   * typed values for the loader; a value that does not fit its column fails the run.
   */
  private rowsOf(columns: { name: string; type: DatasetInfo['columns'][number]['type'] }[], values: unknown[][]): unknown[][] {
    const catalog = this.catalog;
    const width = columns.length;
    const count = values[0].length;
    const rows: unknown[][] = new Array(count);
    for (let i = 0; i < count; i += 1) {
      const row = new Array(width);
      for (let j = 0; j < width; j += 1) {
        try {
          row[j] = catalog.parseValue(columns[j].type, values[j][i]);
        } catch (err) {
          throw new RecipeHandlerError('invalid_output', `output row ${i + 1} of a batch, column "${columns[j].name}": ${(err as Error).message}`);
        }
      }
      rows[i] = row;
    }
    return rows;
  }
}

/** Batches of a handler's output checked and waiting for the loader, besides the one it writes. */
const OUTPUT_BATCHES_AHEAD = 2;
/** Values per page of a handler's input: fewer rows per page of a wide dataset, so a page's memory follows its width less. */
const INPUT_PAGE_VALUES = 50_000;
const pageSizeOf = (dataset: DatasetInfo) => Math.max(100, Math.min(ROWS_STREAM_PAGE_MAX, Math.floor(INPUT_PAGE_VALUES / Math.max(1, dataset.columns.length))));
