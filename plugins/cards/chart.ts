import { definePlugin, problems } from '../../kernel/plugin-api.ts';
import { cardType, cardTypes } from '../dashboards/public.ts';
import { aggregateSql, AGGREGATIONS, checkAggregation, columnOf, NUMERIC, type Aggregation } from './columns.ts';

const CHARTS = ['bar', 'line', 'area', 'pie', 'scatter'] as const;

interface ChartConfig {
  dataset_id: number;
  chart: (typeof CHARTS)[number];
  x: string;
  y?: string;
  aggregation?: Aggregation | 'none';
  series?: string;
  limit?: number;
}

/** The aggregation a chart uses when its config names none: rows per x, or the sum of y. */
const aggregationOf = (config: ChartConfig) => config.aggregation ?? (config.y ? 'sum' : 'count');

/** `chart`: y aggregated per x (and per series), or the raw points of a scatter. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(
      cardTypes,
      cardType<ChartConfig>({
        type: 'chart',
        description:
          'A bar, line, area, pie or scatter chart of a dataset: `y` aggregated (count, count_distinct, sum, avg, min, max; default sum, or count of rows without y) per value of `x` and of `series`, or `aggregation: none` for the points as they are; at most `limit` points (default 500), filtered by the dashboard',
        config: {
          type: 'object',
          properties: {
            dataset_id: { type: 'integer', minimum: 1, maximum: 2_147_483_647 },
            chart: { enum: [...CHARTS] },
            x: { type: 'string', minLength: 1, maxLength: 63 },
            y: { type: 'string', minLength: 1, maxLength: 63 },
            aggregation: { enum: [...AGGREGATIONS, 'none'] },
            series: { type: 'string', minLength: 1, maxLength: 63 },
            limit: { type: 'integer', minimum: 1, maximum: 5000, default: 500 },
          },
          required: ['dataset_id', 'chart', 'x'],
          additionalProperties: false,
        },
        check: async ({ config, at, dataset }) => {
          const source = await dataset(config.dataset_id, `${at}.dataset_id`);
          columnOf(source, config.x, `${at}.x`);
          if (config.series !== undefined) {
            if (config.chart === 'pie') throw problems.badRequest(`${at}.series: a pie chart has one series`, [{ path: `${at}.series`, message: 'not for a pie chart' }]);
            columnOf(source, config.series, `${at}.series`);
          }
          const aggregation = aggregationOf(config);
          if (aggregation === 'none') {
            if (!config.y) throw problems.badRequest(`${at}.y: points as they are need a y column`, [{ path: `${at}.y`, message: 'required with aggregation none' }]);
            columnOf(source, config.y, `${at}.y`, NUMERIC, 'a chart plots numbers');
          } else {
            checkAggregation(source, aggregation, config.y, `${at}.y`);
            if (config.y && (aggregation === 'min' || aggregation === 'max')) columnOf(source, config.y, `${at}.y`, NUMERIC, 'a chart plots numbers');
          }
        },
        data: async ({ config, dataset, query }) => {
          const source = await dataset(config.dataset_id, 'config.dataset_id');
          const aggregation = aggregationOf(config);
          const result = await query(
            (q) => {
              const x = q.id(config.x);
              const series = config.series ? `, ${q.id(config.series)}` : '';
              if (aggregation === 'none') return `select ${x}${series}, ${q.id(config.y!)} from ${q.from(source)} order by ${x}${series}`;
              const y = aggregateSql(aggregation, config.y ? q.id(config.y) : null);
              return `select ${x}${series}, ${y} from ${q.from(source)} group by ${x}${series} order by ${x}${series}`;
            },
            { limit: config.limit ?? 500 },
          );
          const yLabel = aggregation === 'none' ? config.y! : `${aggregation}(${config.y ?? '*'})`;
          // One series per value of the series column (in order of appearance), else one named after y.
          const series = new Map<string, [unknown, unknown][]>();
          for (const row of result.rows) {
            const name = config.series ? String(row[1] ?? '') : yLabel;
            if (!series.has(name)) series.set(name, []);
            series.get(name)!.push([row[0], row[row.length - 1]]);
          }
          const columns = [config.x, ...(config.series ? [config.series] : []), yLabel];
          return {
            data: { chart: config.chart, x: config.x, y: yLabel, series_column: config.series ?? null, series: [...series].map(([name, points]) => ({ name, points })), truncated: result.truncated },
            table: { columns, rows: result.rows },
          };
        },
      }),
    ),
});
