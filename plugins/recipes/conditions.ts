import { sql, type RawBuilder } from 'kysely';
import type { JsonSchema, RecipeDataset, RecipePlanContext } from '../pipeline/public.ts';

/** The parameters of `filter` and `split`: conditions in the rows filter language, combined with and/or. */
export const conditionsParams: JsonSchema = {
  type: 'object',
  properties: {
    conditions: { type: 'array', items: { type: 'string', minLength: 3, maxLength: 10_000 }, minItems: 1, maxItems: 100 },
    combine: { enum: ['and', 'or'], default: 'and' },
  },
  required: ['conditions'],
  additionalProperties: false,
};

/** The conditions as one condition on the input. */
export function combined(context: RecipePlanContext<{ conditions: string[]; combine?: 'and' | 'or' }>, input: RecipeDataset): RawBuilder<boolean> {
  const { conditions, combine = 'and' } = context.params;
  const each = conditions.map((text, i) => sql`(${context.condition(input, text, `body.params.conditions.${i}`)})`);
  return sql<boolean>`(${sql.join(each, sql.raw(` ${combine} `))})`;
}
