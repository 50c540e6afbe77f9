import { identitySchemas as s } from '../../kernel/plugin-api.ts';
import { z } from 'zod';
import { DATA_COLUMN_TYPES } from '../../storage/index.ts';
import { MAX_COLUMNS, validateColumnName } from './column-names.ts';
import { dataValueSchema } from './public.ts';

/** Dataset names are SQL identifiers, so governed SQL can reference a dataset by its name. */
export const datasetName = z
  .string()
  .regex(/^[A-Za-z][A-Za-z0-9_]{0,62}$/, 'must start with a letter and hold only letters, digits and underscores (at most 63)');

export const columnName = z.string().superRefine((name, ctx) => {
  const reason = validateColumnName(name);
  if (reason) ctx.addIssue({ code: 'custom', message: reason });
});

/** The columns a new dataset is declared with: names unique ignoring case. */
export const columnsInput = z
  .array(z.object({ name: columnName, type: z.enum(DATA_COLUMN_TYPES), pii: z.boolean().default(false), description: z.string().max(2000).nullable().default(null) }))
  .max(MAX_COLUMNS)
  .superRefine((columns, ctx) => {
    const seen = new Set<string>();
    columns.forEach((c, i) => {
      if (seen.has(c.name.toLowerCase())) ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `column "${c.name}" appears twice` });
      seen.add(c.name.toLowerCase());
    });
  });

/** A new dataset as `POST /api/datasets` and the `datasets.catalog` service's `create` take it. */
export const newDatasetInput = z.object({ name: datasetName, project_id: s.recordId, description: z.string().max(5000).nullable().optional(), columns: columnsInput.default([]) });

export const columnSchema = z
  .object({
    name: z.string(),
    type: z.enum(DATA_COLUMN_TYPES),
    pii: z.boolean(),
    description: z.string().nullable(),
  })
  .meta({ id: 'DatasetColumn' });

export const datasetSchema = z
  .object({
    id: z.number().int(),
    org_id: z.number().int(),
    project_id: z.number().int(),
    name: z.string(),
    description: z.string().nullable(),
    columns: z.array(columnSchema),
    row_count: z.number().int(),
    version: z.number().int().describe('Grows with every change of the data'),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Dataset' });

export const rowsPageSchema = z
  .object({
    columns: z.array(z.object({ name: z.string(), type: z.string(), masked: z.boolean().describe('PII column shown as *** (you lack datasets.pii.read)') })),
    rows: z.array(z.record(z.string(), dataValueSchema)).describe('Each row as an object from column name to value'),
    next_cursor: z.string().nullable(),
  })
  .meta({ id: 'RowsPage' });

export const loadResultSchema = z.object({ dataset: datasetSchema, rows_loaded: z.number().int() }).meta({ id: 'DatasetLoad' });

/** The JSON export: every row as an object from column name to value. */
export const exportRowsSchema = z.array(z.record(z.string(), dataValueSchema)).meta({ id: 'ExportRows' });
