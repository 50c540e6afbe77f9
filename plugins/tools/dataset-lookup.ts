import { definePlugin, problems } from '../../kernel/plugin-api.ts';
import { agentTool, agentTools } from '../agent_tools/public.ts';
import { datasetCatalog, type DatasetCatalog, type DatasetInfo } from '../datasets/public.ts';

interface Args {
  dataset: string | number;
  filters?: string[];
  columns?: string[];
  limit?: number;
}

/** A model's answer stays small: this many rows at most. */
const MAX_ROWS = 50;

async function datasetNamed(catalog: DatasetCatalog, orgId: number, dataset: string | number, argumentsAt: string): Promise<DatasetInfo> {
  const found = typeof dataset === 'number' ? await catalog.get(orgId, dataset) : (await catalog.findByNames(orgId, [dataset]))[0];
  if (!found) throw problems.badRequest(`no dataset ${typeof dataset === 'number' ? dataset : `named "${dataset}"`} in this organization`, [{ path: `${argumentsAt}.dataset`, message: 'not found' }]);
  return found;
}

/** `dataset_lookup`: a few rows of a dataset, filtered in the rows language, as the caller may see them (row policies, PII masked). */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const catalog = ctx.useService(datasetCatalog);
    ctx.contribute(
      agentTools,
      agentTool<Args>({
        name: 'dataset_lookup',
        description: `Look up rows of a dataset by name or id: filters are "column:op:value" (ops eq, ne, gt, gte, lt, lte, contains, in with comma-separated values, is_null true|false), ANDed; at most ${MAX_ROWS} rows. Personal data is masked unless the user may see it.`,
        capability: 'datasets.read',
        parameters: {
          type: 'object',
          properties: {
            dataset: { type: ['string', 'integer'], description: 'The dataset\u2019s name or id' },
            filters: { type: 'array', items: { type: 'string', maxLength: 1000 }, maxItems: 20 },
            columns: { type: 'array', items: { type: 'string', maxLength: 200 }, maxItems: 100, description: 'Default: every column' },
            limit: { type: 'integer', minimum: 1, maximum: MAX_ROWS, default: 20 },
          },
          required: ['dataset'],
          additionalProperties: false,
        },
        async run(args, { orgId, principal, argumentsAt }) {
          const dataset = await datasetNamed(catalog, orgId, args.dataset, argumentsAt);
          const limit = args.limit ?? 20;
          const page = await catalog.rows(principal, orgId, dataset.id, { limit, filter: args.filters, columns: args.columns?.join(',') });
          return { dataset: dataset.name, columns: page.columns, rows: page.rows, more: page.next_cursor !== null };
        },
      }),
    );
  },
});
