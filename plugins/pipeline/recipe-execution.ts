import { problems, type Principal } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import { PII_MASK, ROWS_PAGE_MAX, type DatasetCatalog, type DatasetInfo } from '../datasets/public.ts';
import { BatchChannel } from './batch-channel.ts';
import { RecipeHandlerError, runRecipeHandler } from './handler-runtime.ts';
import { checkCounts, type RecipePlanning } from './planning.ts';
import type { OfferedRecipeType, RecipeTypeCatalog } from './public.ts';
import type { Recipe } from './recipe-store.ts';

/** What running a recipe needs besides the recipe: who runs it, how to stop it, where to log. */
export interface ExecutionContext {
  principal: Principal;
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
    const planned = await this.planning.plan(type, recipe.params, context.principal, inputs, outputs.length);
    const datasets = await this.planning.governed(context.principal, inputs);
    const statements = await Promise.all(planned.map((output) => this.planning.checked(output.sql, datasets)));
    const written = await this.catalog.replace(
      outputs.map((dataset, i) => ({ dataset, columns: planned[i].columns })),
      async (staging) => {
        const counts: number[] = [];
        // One output after another: each statement is the database's work, not this process's.
        for (const [i, table] of staging.entries()) {
          const { rows } = await this.storage.writeGoverned({ sql: statements[i], params: [], orgId: recipe.org_id, datasets, mask: PII_MASK, timeoutMs: context.timeoutMs, target: table, columns: planned[i].columns, signal: context.signal });
          context.log('info', `computed ${rows} rows for "${outputs[i].name}"`);
          counts.push(rows);
        }
        return counts;
      },
    );
    return written.reduce((sum, { rows }) => sum + rows, 0);
  }

  /**
   * A handler type: its inputs are read page by page as the run's principal may read them (row
   * policies apply), its output rows checked against the columns it declared and loaded as an
   * upload is: into a staging table swapped in once the handler returned.
   */
  private async runHandler(type: OfferedRecipeType, recipe: Recipe, inputs: DatasetInfo[], output: DatasetInfo, context: ExecutionContext): Promise<number> {
    checkCounts(type, inputs.length, 1);
    await this.planning.governed(context.principal, inputs); // refuses PII without datasets.pii.read
    const channel = new BatchChannel<unknown[][]>();
    let columns: { name: string; type: DatasetInfo['columns'][number]['type'] }[] = [];
    let loading = null as Promise<{ loaded: number }> | null;
    try {
      await runRecipeHandler({
        modulePath: type.handler!.modulePath,
        exportName: type.handler!.exportName,
        params: recipe.params,
        inputs: inputs.map((dataset) => ({ dataset: { id: dataset.id, name: dataset.name, columns: dataset.columns.map((c) => ({ name: c.name, type: c.type })) }, pages: () => this.pagesOf(context.principal, dataset) })),
        output: {
          columns: async (declared) => {
            columns = declared as typeof columns;
            loading = this.catalog.load(output, columns, channel, 'replace');
            loading.catch(() => undefined); // awaited below; a failure also ends the channel's pushes
          },
          write: async (rows) => channel.push(rows.map((row, i) => columns.map((c) => this.value(c, row[c.name], i)))),
        },
        signal: context.signal,
        timeoutMs: context.timeoutMs,
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

  /** The dataset's rows as the principal may read them, a page at a time, in row order. */
  private async *pagesOf(principal: Principal, dataset: DatasetInfo): AsyncGenerator<Record<string, unknown>[]> {
    let cursor: string | undefined;
    do {
      const page = await this.catalog.rows(principal, dataset.org_id, dataset.id, { limit: ROWS_PAGE_MAX, cursor });
      yield page.rows;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  private value(column: { name: string; type: DatasetInfo['columns'][number]['type'] }, value: unknown, row: number): unknown {
    try {
      return this.catalog.parseValue(column.type, value);
    } catch (err) {
      throw new RecipeHandlerError('invalid_output', `output row ${row + 1} of a batch, column "${column.name}": ${(err as Error).message}`);
    }
  }
}
