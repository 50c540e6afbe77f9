import type { RawBuilder } from 'kysely';
import { problems, type Principal } from '../../kernel/plugin-api.ts';
import { GovernedSqlUnavailableError, QueryRejectedError, QueryTimeoutError, SelectRefusedError, type DataColumn, type GovernedDataset, type Storage } from '../../storage/index.ts';
import { PII_MASK, type DatasetCatalog, type DatasetInfo } from '../datasets/public.ts';
import type { OfferedRecipeType, PlannedOutput, RecipeDataset, RecipePlanContext } from './public.ts';
import type { Recipe } from './recipe-store.ts';

/** How many recipes up a dataset without columns takes its columns from its producers' plans. */
const MAX_PROPAGATION = 50;

/** How long describing a recipe's result (its schema, its check) may take. */
export const DESCRIBE_TIMEOUT_MS = 30_000;

/** A dataset as a recipe reading it will find it: `unbuilt` when its columns are its producer's plan, not yet its table's. */
export type ExpectedDataset = DatasetInfo & { unbuilt?: boolean };

/** An output column as the recipe writes it: PII when computed from a PII column. */
export interface OutputColumn extends DataColumn {
  pii: boolean;
}

/** A planned output ready to run: the SELECT as governed SQL text and the columns it writes. */
export interface RunnableOutput {
  sql: string;
  columns: OutputColumn[];
  planned: PlannedOutput;
}

/**
 * Turns a planned recipe type into SQL over its inputs as governed SQL reads them: each input by
 * its dataset name, as the principal may see it (row policies apply; reading a PII column without
 * `datasets.pii.read` is refused before anything runs, since a masked value written into an
 * output would be a corrupted value, not a hidden one).
 */
export class RecipePlanning {
  constructor(
    private readonly storage: Storage,
    private readonly catalog: DatasetCatalog,
    /** The recipe writing a dataset, with its type as offered in the organization, if any. */
    private readonly producerOf: (orgId: number, datasetId: number) => Promise<{ recipe: Recipe; type: OfferedRecipeType } | null>,
  ) {}

  /**
   * The datasets as a recipe reading them will find them: one that has no columns yet (it was
   * never written) takes the columns its producer's plan would write, recursively, so a chain of
   * recipes can be saved, checked and described before its first run.
   */
  async expected(datasets: DatasetInfo[], principal: Principal | null, depth = 0): Promise<ExpectedDataset[]> {
    return Promise.all(
      datasets.map(async (dataset) => {
        if (dataset.columns.length > 0 || depth >= MAX_PROPAGATION) return dataset;
        const producer = await this.producerOf(dataset.org_id, dataset.id);
        if (!producer?.type.plan) return dataset;
        try {
          const inputs = await this.expected(await this.datasets(dataset.org_id, producer.recipe.inputs, 'inputs'), principal, depth + 1);
          const planned = await this.plan(producer.type, producer.recipe.params, principal, inputs, producer.recipe.outputs.length);
          const columns = planned[producer.recipe.outputs.indexOf(dataset.id)].columns;
          return { ...dataset, columns: columns.map((c) => ({ name: c.name, type: c.type, pii: c.pii })), unbuilt: true };
        } catch {
          return dataset; // its producer no longer plans: the dataset is as it is
        }
      }),
    );
  }

  /** The datasets of the organization with these ids, in order; a missing one is a 4xx naming `where`. */
  async datasets(orgId: number, ids: number[], where: string): Promise<DatasetInfo[]> {
    return Promise.all(
      ids.map(async (id, i) => {
        try {
          return await this.catalog.get(orgId, id);
        } catch {
          throw problems.unprocessable(`dataset ${id} does not exist in this organization`, [{ path: `${where}.${i}`, message: 'no such dataset' }]);
        }
      }),
    );
  }

  /**
   * The governed view of the inputs for `principal`: the datasets a recipe's SQL may read, and how.
   * Null: the platform planning a recipe to know its columns (lineage), never reading a row.
   */
  async governed(principal: Principal | null, inputs: DatasetInfo[]): Promise<GovernedDataset[]> {
    this.refusePii(principal, inputs);
    const unique = [...new Map(inputs.map((d) => [d.id, d])).values()];
    return Promise.all(unique.map(async (dataset) => ({ ...(await this.catalog.governed(principal, dataset)), unbuilt: (dataset as ExpectedDataset).unbuilt === true })));
  }

  /** A recipe reading PII runs as someone who sees it (a 403 otherwise); null, the platform planning, reads no row. */
  refusePii(principal: Principal | null, inputs: DatasetInfo[]): void {
    if (!principal || this.catalog.seesPii(principal)) return;
    const pii = inputs.find((d) => d.columns.some((c) => c.pii));
    if (pii) throw problems.forbidden(`dataset "${pii.name}" has PII columns: a recipe reading it runs as someone holding the capability "datasets.pii.read"`);
  }

  /**
   * Plans a recipe of a planned type over its inputs, checking the type's input and output counts:
   * each output's SELECT, its columns, and their PII flags. `governed`: the inputs' governed view
   * for `principal`, when the caller already has it (a run, which also runs the statements over it).
   */
  async plan(type: OfferedRecipeType, params: unknown, principal: Principal | null, inputs: DatasetInfo[], outputCount: number, governed?: GovernedDataset[]): Promise<RunnableOutput[]> {
    checkCounts(type, inputs.length, outputCount);
    governed ??= await this.governed(principal, inputs);
    const recipeInputs: RecipeDataset[] = inputs.map((d) => ({ id: d.id, name: d.name, columns: d.columns.map((c) => ({ name: c.name, type: c.type })) }));
    const context: RecipePlanContext<unknown> = {
      params,
      inputs: recipeInputs,
      outputs: outputCount,
      condition: (input, filter, where) => this.catalog.condition(input.columns, filter, where),
      cast: (expression, columnType) => this.storage.dataTables.cast(expression, columnType),
      describe: (select, where) => this.describe(inputs[0]?.org_id ?? 0, this.text(select), governed, where),
    };
    const planned = await type.plan!(context);
    if (planned.length !== outputCount) throw problems.unprocessable(`recipe type "${type.id}" planned ${planned.length} outputs for ${outputCount}`);
    return planned.map((output) => ({
      sql: this.text(output.select),
      planned: output,
      columns: output.columns.map((c) => ({
        name: c.name,
        type: c.type,
        pii: c.origin.from.some((f) => inputs[f.input]?.columns.find((col) => col.name === f.column)?.pii),
      })),
    }));
  }

  /** A SELECT as SQL text with its values written in (governed SQL takes text); a user's text as written. */
  text(select: RawBuilder<unknown> | string): string {
    return typeof select === 'string' ? select : this.storage.dataTables.inline(select, this.storage.db);
  }

  /**
   * The statement as governed SQL takes it, after the friendly first refusals `/api/sql` gives (not
   * one SELECT, a physical table named) and, where the parse is exact, a table that is not one of
   * the recipe's inputs.
   */
  async checked(text: string, datasets: GovernedDataset[]): Promise<string> {
    const parsed = await this.storage.parseGovernedSelect(text);
    if (parsed.exact) {
      const inputs = new Set(datasets.map((d) => d.name.toLowerCase()));
      const other = parsed.relations.find((name) => !inputs.has(name.toLowerCase()));
      if (other !== undefined) throw new SelectRefusedError(`"${other}" is not an input of the recipe`);
    }
    return parsed.sql;
  }

  private async describe(orgId: number, text: string, datasets: GovernedDataset[], where: string): Promise<DataColumn[]> {
    try {
      return await this.storage.describeGoverned({ sql: await this.checked(text, datasets), params: [], orgId, datasets, mask: PII_MASK, timeoutMs: DESCRIBE_TIMEOUT_MS });
    } catch (err) {
      if (err instanceof SelectRefusedError || err instanceof QueryRejectedError) throw problems.badRequest(`the query is refused: ${err.message}`, [{ path: where, message: err.message }]);
      if (err instanceof QueryTimeoutError) throw problems.unprocessable(`describing the query took longer than ${DESCRIBE_TIMEOUT_MS} ms`, [{ path: where, message: 'too slow to describe' }]);
      if (err instanceof GovernedSqlUnavailableError) throw problems.unavailable(err.message);
      throw err;
    }
  }
}

/** The counts of inputs and outputs the type takes; a recipe outside them is a 422 naming the field. */
export function checkCounts(type: OfferedRecipeType, inputs: number, outputs: number): void {
  const { min, max } = type.inputs;
  if (inputs < min || (max !== null && inputs > max)) {
    const wanted = max === null ? `at least ${min}` : min === max ? `exactly ${min}` : `${min} to ${max}`;
    throw problems.unprocessable(`a "${type.id}" recipe takes ${wanted} input${max === 1 ? '' : 's'}, not ${inputs}`, [{ path: 'body.inputs', message: `takes ${wanted}` }]);
  }
  if (outputs !== type.outputs) {
    throw problems.unprocessable(`a "${type.id}" recipe writes exactly ${type.outputs} output${type.outputs === 1 ? '' : 's'}, not ${outputs}`, [{ path: 'body.outputs', message: `takes exactly ${type.outputs}` }]);
  }
}
