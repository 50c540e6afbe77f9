import { z } from 'zod';

/** The most columns a dataset has (the datasets plugin's limit): a longer list cannot name real columns. */
const MAX_COLUMNS = 1000;

/** A column name as a lineage question names it: within Postgres's 63 bytes, no control characters. */
export const columnName = z
  .string()
  .min(1)
  .refine((name) => Buffer.byteLength(name, 'utf8') <= 63, 'a column name has at most 63 bytes')
  .refine((name) => !/[\u0000-\u001f]/.test(name), 'a column name may not contain control characters');

/** `a,b,c`: column names, at most as many as a dataset may have. */
export const columnList = z
  .string()
  .max(MAX_COLUMNS * 64)
  .transform((text) => text.split(',').map((name) => name.trim()))
  .pipe(z.array(columnName).max(MAX_COLUMNS, `at most ${MAX_COLUMNS} columns`));

const transformation = z.enum(['identity', 'renamed', 'cast', 'derived', 'aggregated']);

export const datasetLineageSchema = z
  .object({
    nodes: z.array(
      z
        .object({
          id: z.string().describe('`dataset:<id>` or `recipe:<id>`'),
          kind: z.enum(['dataset', 'recipe']),
          ref_id: z.number().int().describe('The id of the dataset or recipe'),
          name: z.string().nullable().describe('Null for a dataset that no longer exists'),
          type: z.string().nullable().describe('The recipe type; null for a dataset'),
          depth: z.number().int().describe('Recipes away from the dataset: negative upstream, positive downstream, 0 the dataset itself'),
        })
        .meta({ id: 'LineageNode' }),
    ),
    edges: z.array(z.object({ from: z.string(), to: z.string() }).meta({ id: 'LineageEdge', description: 'dataset → recipe for an input, recipe → dataset for an output' })),
  })
  .meta({ id: 'DatasetLineage' });

export const columnLineageSchema = z
  .object({
    items: z.array(
      z
        .object({
          dataset_id: z.number().int(),
          dataset: z.string().nullable().describe('The dataset name; null for a dataset that no longer exists'),
          column: z.string(),
          recipe_id: z.number().int().describe('The recipe linking this column to the previous one on the way'),
          transformation: transformation.describe('How that recipe computes the downstream column of the two from the upstream one'),
          direction: z.enum(['upstream', 'downstream']),
          depth: z.number().int().describe('Recipes away: negative upstream, positive downstream'),
        })
        .meta({ id: 'ColumnLineageStep' }),
    ),
  })
  .meta({ id: 'ColumnLineage' });

const consumerSchema = z
  .object({
    kind: z.string().describe('What reads the columns, e.g. `job`, `api_service`, `dashboard`'),
    id: z.union([z.number(), z.string()]),
    name: z.string(),
    plugin_id: z.string().describe('The plugin that reported it'),
    dataset_id: z.number().int(),
    columns: z.array(z.string()),
    details: z
      .record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.null()]))
      .optional()
      .describe('What else names it, as its plugin says (an `api_service_endpoint`: service_id, key, endpoint, status)'),
  })
  .meta({ id: 'LineageConsumer' });

export const impactSchema = z
  .object({
    dataset_id: z.number().int(),
    columns: z.array(z.string()).describe('The columns asked about'),
    datasets: z
      .array(z.object({ dataset_id: z.number().int(), dataset: z.string().nullable(), columns: z.array(z.string()) }))
      .describe('Downstream datasets with their columns computed, directly or not, from those columns'),
    recipes: z.array(z.object({ id: z.number().int(), name: z.string(), type: z.string() })).describe('The recipes the columns flow through'),
    jobs: z.array(consumerSchema).describe('The consumers of kind `job`'),
    consumers: z.array(consumerSchema).describe('What plugins report reading the columns or the affected ones (jobs included)'),
  })
  .meta({ id: 'LineageImpact' });
