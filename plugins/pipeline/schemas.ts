import { identitySchemas as s, z } from '../../kernel/plugin-api.ts';
import { DATA_COLUMN_TYPES } from '../../storage/index.ts';

const datasetIds = (max: number) => z.array(s.recordId).max(max);

export const recipeInput = z.object({
  project_id: s.recordId,
  name: s.displayName,
  type: z.string().min(1).max(100),
  inputs: datasetIds(100).describe('Dataset ids the recipe reads, in order (a join: left, then right)'),
  outputs: datasetIds(16).min(1).describe('Dataset ids the recipe writes, in order (a split: matching rows, then the rest); each is the output of no other recipe'),
  params: z.record(z.string(), z.unknown()).describe("The recipe type's parameters, valid against its JSON Schema (GET /api/plugins/recipe-types); {} when omitted"),
});

/** A new recipe: `params` may be omitted (a type whose parameters all have defaults). */
export const newRecipeInput = recipeInput.extend({ params: recipeInput.shape.params.default({}) });

export const recipeSchema = z
  .object({
    id: z.number().int(),
    project_id: z.number().int(),
    name: z.string(),
    type: z.string(),
    inputs: z.array(z.number().int()),
    outputs: z.array(z.number().int()),
    params: z.record(z.string(), z.unknown()),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Recipe' });

export const recipeOutputsSchema = z
  .object({
    outputs: z.array(
      z.object({
        dataset_id: z.number().int(),
        dataset: z.string(),
        source: z.enum(['plan', 'last_run']).describe('`plan`: the columns the recipe would write, from its definition; `last_run`: a handler type, whose columns are known once it ran (the output as it is)'),
        columns: z.array(z.object({ name: z.string(), type: z.enum(DATA_COLUMN_TYPES), pii: z.boolean() })),
      }),
    ),
  })
  .meta({ id: 'RecipeOutputSchema' });

export const flowSchema = z
  .object({
    nodes: z.array(
      z.object({
        id: z.string().describe('`dataset:<id>` or `recipe:<id>`'),
        kind: z.enum(['dataset', 'recipe']),
        ref_id: z.number().int(),
        name: z.string(),
        type: z.string().nullable().describe("A recipe's type; null for a dataset"),
        project_id: z.number().int(),
        last_run_status: z.string().nullable().describe("A recipe's latest run status; null for a dataset or a recipe never run"),
      }),
    ),
    edges: z.array(z.object({ from: z.string(), to: z.string() })),
  })
  .meta({ id: 'PipelineFlow' });

/** An ISO-8601 date or date-time, as `since` and `until` take it. */
export const isoInstant = z
  .string()
  .max(40)
  .refine((text) => /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(text) && !Number.isNaN(Date.parse(text)), 'must be an ISO-8601 date or date-time such as 2026-11-25T10:00:00Z')
  .transform((text) => new Date(text).toISOString());
