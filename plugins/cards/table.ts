import { definePlugin } from '../../kernel/plugin-api.ts';
import { cardType, cardTypes } from '../dashboards/public.ts';
import { columnOf } from './columns.ts';

interface TableConfig {
  dataset_id: number;
  columns?: string[];
  sort?: { column: string; direction?: 'asc' | 'desc' }[];
  limit?: number;
}

/** `table`: rows of a dataset, chosen columns, sorted, at most `limit`. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      cardTypes,
      cardType<TableConfig>({
        type: 'table',
        description: 'Rows of a dataset (chosen columns, sorted), at most `limit` (1 to 1000, default 100), filtered by the dashboard',
        config: {
          type: 'object',
          properties: {
            dataset_id: { type: 'integer', minimum: 1, maximum: 2_147_483_647 },
            columns: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 63 }, minItems: 1, maxItems: 100, uniqueItems: true },
            sort: {
              type: 'array',
              maxItems: 10,
              items: { type: 'object', properties: { column: { type: 'string', minLength: 1, maxLength: 63 }, direction: { enum: ['asc', 'desc'], default: 'asc' } }, required: ['column'], additionalProperties: false },
            },
            limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
          },
          required: ['dataset_id'],
          additionalProperties: false,
        },
        check: async ({ config, at, dataset }) => {
          const source = await dataset(config.dataset_id, `${at}.dataset_id`);
          for (const [i, name] of (config.columns ?? []).entries()) columnOf(source, name, `${at}.columns.${i}`);
          for (const [i, sort] of (config.sort ?? []).entries()) columnOf(source, sort.column, `${at}.sort.${i}.column`);
        },
        data: async ({ config, dataset, query }) => {
          const source = await dataset(config.dataset_id, 'config.dataset_id');
          const names = config.columns ?? source.columns.map((c) => c.name);
          const limit = config.limit ?? 100;
          const result = await query(
            (q) => {
              const order = (config.sort ?? []).map((s) => `${q.id(s.column)} ${s.direction === 'desc' ? 'desc' : 'asc'}`).join(', ');
              return `select ${names.map((n) => q.id(n)).join(', ')} from ${q.from(source)}${order ? ` order by ${order}` : ''}`;
            },
            { limit },
          );
          return { data: { columns: result.columns, rows: result.rows, truncated: result.truncated }, table: { columns: result.columns.map((c) => c.name), rows: result.rows } };
        },
      }),
    ),
});
