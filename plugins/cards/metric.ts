import { definePlugin, problems } from '../../kernel/plugin-api.ts';
import { cardType, cardTypes } from '../dashboards/public.ts';
import { aggregateSql, AGGREGATIONS, checkAggregation, type Aggregation } from './columns.ts';

interface MetricConfig {
  dataset_id?: number;
  aggregation?: Aggregation;
  column?: string;
  query?: { sql: string; params?: (string | number | boolean | null)[] };
  label?: string;
}

/** `metric`: one number, an aggregate of a dataset's column or the first value of a governed query. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      cardTypes,
      cardType<MetricConfig>({
        type: 'metric',
        description: 'One value: an aggregate (count, count_distinct, sum, avg, min, max) of a dataset\u2019s column, filtered by the dashboard; or the first value of a governed SQL query (not narrowed by the dashboard\u2019s filters)',
        config: {
          type: 'object',
          properties: {
            dataset_id: { type: 'integer', minimum: 1, maximum: 2_147_483_647 },
            aggregation: { enum: [...AGGREGATIONS], default: 'count' },
            column: { type: 'string', minLength: 1, maxLength: 63 },
            query: {
              type: 'object',
              properties: { sql: { type: 'string', minLength: 1, maxLength: 100_000 }, params: { type: 'array', maxItems: 100, items: { anyOf: [{ type: 'string' }, { type: 'number' }, { type: 'boolean' }, { type: 'null' }] } } },
              required: ['sql'],
              additionalProperties: false,
            },
            label: { type: 'string', maxLength: 200 },
          },
          additionalProperties: false,
        },
        check: async ({ config, at, dataset }) => {
          if ((config.dataset_id === undefined) === (config.query === undefined)) {
            throw problems.badRequest(`${at}: give either dataset_id (with aggregation and column) or query`, [{ path: `${at}.dataset_id`, message: 'exactly one of dataset_id and query' }]);
          }
          if (config.dataset_id !== undefined) checkAggregation(await dataset(config.dataset_id, `${at}.dataset_id`), config.aggregation ?? 'count', config.column, `${at}.column`);
        },
        data: async ({ config, dataset, query, governed }) => {
          const aggregation = config.aggregation ?? 'count';
          const result = config.query
            ? await governed(config.query, { limit: 1 })
            : await (async () => {
                const source = await dataset(config.dataset_id!, 'config.dataset_id');
                return query((q) => `select ${aggregateSql(aggregation, config.column ? q.id(config.column) : null)} as value from ${q.from(source)}`, { limit: 1 });
              })();
          const value = result.rows[0]?.[0] ?? null;
          const label = config.label ?? (config.query ? result.columns[0]?.name ?? 'value' : `${aggregation}${config.column ? `(${config.column})` : ''}`);
          return { data: { value, label }, table: { columns: [label], rows: [[value]] } };
        },
      }),
    ),
});
