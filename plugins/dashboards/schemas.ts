import { identitySchemas as s, z } from '../../kernel/plugin-api.ts';
import { GRID_COLUMNS } from './card-data.ts';

export const layoutSchema = z
  .object({
    x: z.number().int().min(0).max(GRID_COLUMNS - 1).describe(`Column of the card's left edge on a grid ${GRID_COLUMNS} columns wide`),
    y: z.number().int().min(0).max(10_000).describe('Row of its top edge'),
    w: z.number().int().min(1).max(GRID_COLUMNS).describe('Width in columns (x + w at most the grid\u2019s width)'),
    h: z.number().int().min(1).max(100).describe('Height in rows'),
  })
  .strict()
  .meta({ id: 'CardLayout' });

export const cardInput = z
  .object({
    type: z.string().min(1).max(63).describe('A card type offered here (GET /api/dashboards/card-types): metric, table, chart, text, process_map, or a plugin\u2019s'),
    title: z.string().trim().max(200).nullable().optional(),
    layout: layoutSchema.optional().describe('Default: full width\u2019s half, below the other cards'),
    config: z.record(z.string(), z.unknown()).describe('Checked against the type\u2019s JSON Schema and the organization\u2019s data (a column that exists)'),
  })
  .strict();

const filterSchema = z
  .object({
    column: z.string().min(1).max(63).describe('A column name: the filter narrows every card whose dataset has that column'),
    label: z.string().trim().max(100).nullable().optional(),
  })
  .strict();

export const filtersInput = z
  .array(filterSchema)
  .max(20)
  .superRefine((filters, ctx) => {
    const seen = new Set<string>();
    for (const [i, filter] of filters.entries()) {
      if (seen.has(filter.column)) ctx.addIssue({ code: 'custom', path: [i, 'column'], message: `column ${filter.column} has a filter already` });
      seen.add(filter.column);
    }
  });

export const dashboardInput = z
  .object({
    project_id: s.recordId,
    name: z.string().trim().min(1).max(200),
    description: z.string().max(2000).nullable().optional(),
    cards: z.array(cardInput).max(50).default([]),
    filters: filtersInput.default([]),
  })
  .strict();

export const dashboardChanges = z
  .object({
    name: z.string().trim().min(1).max(200).optional(),
    description: z.string().max(2000).nullable().optional(),
    filters: filtersInput.optional(),
  })
  .strict();

export const cardChanges = cardInput.partial().strict();

export const cardSchema = z
  .object({
    id: z.number().int(),
    type: z.string(),
    title: z.string().nullable(),
    layout: layoutSchema,
    config: z.record(z.string(), z.unknown()),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'DashboardCard' });

export const dashboardSchema = z
  .object({
    id: z.number().int(),
    org_id: z.number().int(),
    project_id: z.number().int(),
    name: z.string(),
    description: z.string().nullable(),
    filters: z.array(z.object({ column: z.string(), label: z.string().nullable() })),
    cards: z.array(cardSchema),
    created_by: z.number().int().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Dashboard' });

export const cardTypeSchema = z
  .object({
    type: z.string(),
    plugin_id: z.string(),
    description: z.string().nullable(),
    config: z.record(z.string(), z.unknown()).describe('JSON Schema (2020-12) of the card config'),
  })
  .meta({ id: 'CardType' });

export const cardDataSchema = z
  .object({
    card_id: z.number().int(),
    type: z.string(),
    data: z.record(z.string(), z.unknown()).describe('As the card type computes it (see README, "Dashboards")'),
    computed_at: z.string(),
  })
  .meta({ id: 'CardData' });

/** Query parameters of a card's data: the dashboard's filters, by column name (repeat one for several values). */
export const filterQuery = z
  .object({})
  .catchall(z.union([z.string(), z.array(z.string())]))
  .describe('Each dashboard filter by its column name; repeat a name for several values (any of them); an empty value is null');
