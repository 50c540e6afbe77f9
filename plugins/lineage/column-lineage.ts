import type { DatasetCatalog, DatasetInfo } from '../datasets/public.ts';
import type { ColumnTransformation, PipelineGraph, RecipeSummary } from '../pipeline/public.ts';

type RecipeOrigins = Awaited<ReturnType<PipelineGraph['columnOrigins']>>;

/**
 * What one lineage question reads, each read once: the organization's recipes, their column
 * origins, and the datasets met on the way (null for one that no longer exists).
 */
export class LineageReader {
  private readonly origins = new Map<number, Promise<RecipeOrigins>>();
  private readonly datasets = new Map<number, Promise<DatasetInfo | null>>();

  private constructor(
    readonly orgId: number,
    readonly recipes: RecipeSummary[],
    private readonly graph: PipelineGraph,
    private readonly catalog: DatasetCatalog,
  ) {}

  static async open(orgId: number, graph: PipelineGraph, catalog: DatasetCatalog): Promise<LineageReader> {
    return new LineageReader(orgId, await graph.recipes(orgId), graph, catalog);
  }

  originsOf(recipeId: number): Promise<RecipeOrigins> {
    let origins = this.origins.get(recipeId);
    if (!origins) this.origins.set(recipeId, (origins = this.graph.columnOrigins(this.orgId, recipeId)));
    return origins;
  }

  dataset(id: number): Promise<DatasetInfo | null> {
    let dataset = this.datasets.get(id);
    if (!dataset) this.datasets.set(id, (dataset = Promise.resolve(this.catalog.get(this.orgId, id)).catch(() => null)));
    return dataset;
  }

  /** The dataset's columns and those the recipes writing it plan to write (an output not built yet has none of its own). */
  async columnsOf(datasetId: number): Promise<string[]> {
    const names = new Set(((await this.dataset(datasetId))?.columns ?? []).map((c) => c.name));
    for (const recipe of this.recipes.filter((r) => r.outputs.includes(datasetId))) {
      const planned = (await this.originsOf(recipe.id))?.find((o) => o.dataset_id === datasetId);
      for (const c of planned?.columns ?? []) names.add(c.name);
    }
    return [...names];
  }
}

/** A column reached from the column asked about, through the recipe linking it to the previous one. */
export interface ColumnStep {
  dataset_id: number;
  column: string;
  recipe_id: number;
  /** How this step's recipe computes the downstream column of the two from the upstream one. */
  transformation: ColumnTransformation;
  direction: 'upstream' | 'downstream';
  /** Recipes away: negative upstream, positive downstream. */
  depth: number;
}

type Link = Omit<ColumnStep, 'direction' | 'depth'>;
type DatasetColumn = { dataset_id: number; column: string };

/**
 * Follows column origins transitively, breadth first, each column met once (at its nearest depth,
 * through the first recipe reaching it). A recipe whose origins are unknown (a handler type, one
 * that no longer plans) is taken to derive every output column from every input column.
 */
export class ColumnLineage {
  constructor(private readonly reader: LineageReader) {}

  /** The input columns the columns are computed from, recursively. */
  upstream(starts: DatasetColumn[]): Promise<ColumnStep[]> {
    return this.walk(starts, 'upstream', (from) => this.sourcesOf(from));
  }

  /** The output columns computed from the columns, recursively. */
  downstream(starts: DatasetColumn[]): Promise<ColumnStep[]> {
    return this.walk(starts, 'downstream', (from) => this.dependentsOf(from));
  }

  private async walk(starts: DatasetColumn[], direction: ColumnStep['direction'], next: (from: DatasetColumn) => Promise<Link[]>): Promise<ColumnStep[]> {
    const key = (c: DatasetColumn) => `${c.dataset_id}\u0000${c.column}`;
    const seen = new Set(starts.map(key));
    const steps: ColumnStep[] = [];
    let frontier = starts;
    for (let depth = 1; frontier.length; depth++) {
      const reached: ColumnStep[] = [];
      for (const from of frontier) {
        for (const link of await next(from)) {
          if (seen.has(key(link))) continue;
          seen.add(key(link));
          reached.push({ ...link, direction, depth: direction === 'upstream' ? -depth : depth });
        }
      }
      steps.push(...reached);
      frontier = reached;
    }
    return steps;
  }

  private async sourcesOf({ dataset_id, column }: DatasetColumn): Promise<Link[]> {
    const links: Link[] = [];
    for (const recipe of this.reader.recipes.filter((r) => r.outputs.includes(dataset_id))) {
      const output = (await this.reader.originsOf(recipe.id))?.find((o) => o.dataset_id === dataset_id);
      const known = output?.columns.find((c) => c.name === column);
      if (known) {
        for (const f of known.origin.from) links.push({ dataset_id: recipe.inputs[f.input], column: f.column, recipe_id: recipe.id, transformation: known.origin.transformation });
        continue;
      }
      for (const input of new Set(recipe.inputs)) {
        for (const name of await this.reader.columnsOf(input)) links.push({ dataset_id: input, column: name, recipe_id: recipe.id, transformation: 'derived' });
      }
    }
    return links;
  }

  private async dependentsOf({ dataset_id, column }: DatasetColumn): Promise<Link[]> {
    const links: Link[] = [];
    for (const recipe of this.reader.recipes.filter((r) => r.inputs.includes(dataset_id))) {
      const origins = await this.reader.originsOf(recipe.id);
      if (origins) {
        const reads = (f: { input: number; column: string }) => recipe.inputs[f.input] === dataset_id && f.column === column;
        for (const output of origins) {
          for (const c of output.columns) if (c.origin.from.some(reads)) links.push({ dataset_id: output.dataset_id, column: c.name, recipe_id: recipe.id, transformation: c.origin.transformation });
        }
        continue;
      }
      for (const output of new Set(recipe.outputs)) {
        for (const name of await this.reader.columnsOf(output)) links.push({ dataset_id: output, column: name, recipe_id: recipe.id, transformation: 'derived' });
      }
    }
    return links;
  }
}
