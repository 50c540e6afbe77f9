import { z } from 'zod';

/** Parameters of each rule type; `column` names a column of the rule's dataset. */
export const ruleDefinition = z.discriminatedUnion('type', [
  z.object({ type: z.literal('not_null'), params: z.object({ column: z.string().min(1) }).strict() }),
  z.object({ type: z.literal('unique'), params: z.object({ column: z.string().min(1) }).strict() }),
  z.object({
    type: z.literal('range'),
    params: z
      .object({ column: z.string().min(1), min: z.number().optional(), max: z.number().optional() })
      .strict()
      .refine((p) => p.min !== undefined || p.max !== undefined, 'give min, max or both')
      .refine((p) => p.min === undefined || p.max === undefined || p.min <= p.max, 'min must not exceed max'),
  }),
  z.object({
    type: z.literal('pattern'),
    // Compiled by the engine that runs it when the rule is saved (index.ts), not by JavaScript's.
    params: z.object({ column: z.string().min(1), pattern: z.string().min(1).max(1000) }).strict(),
  }),
  z.object({ type: z.literal('allowed_values'), params: z.object({ column: z.string().min(1), values: z.array(z.union([z.string(), z.number(), z.boolean()])).min(1).max(1000) }).strict() }),
  z.object({
    type: z.literal('row_count_between'),
    params: z
      .object({ min: z.number().int().min(0).optional(), max: z.number().int().min(0).optional() })
      .strict()
      .refine((p) => p.min !== undefined || p.max !== undefined, 'give min, max or both')
      .refine((p) => p.min === undefined || p.max === undefined || p.min <= p.max, 'min must not exceed max'),
  }),
  z.object({
    type: z.literal('custom_sql'),
    params: z
      .object({ condition: z.string().min(1).max(10_000).describe('A SQL condition every row must satisfy, over the dataset\u2019s columns') })
      .strict(),
  }),
  z.object({
    type: z.literal('freshness'),
    params: z.object({ column: z.string().min(1).optional().describe('A date or timestamp column; default: when the data last changed'), max_age_hours: z.number().positive() }).strict(),
  }),
]);

export type RuleDefinition = z.infer<typeof ruleDefinition>;
export const RULE_TYPES = ['not_null', 'unique', 'range', 'pattern', 'allowed_values', 'row_count_between', 'freshness', 'custom_sql'] as const;
