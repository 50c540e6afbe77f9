import { z } from 'zod';
import { definePlugin, defineRoute, identitySchemas as s, kernelServices, problems } from '../../kernel/plugin-api.ts';
import { datasetCatalog } from '../datasets/public.ts';
import { pipelineGraph } from '../pipeline/public.ts';
import { ColumnLineage, LineageReader } from './column-lineage.ts';
import { datasetLineage } from './dataset-lineage.ts';
import { impactOf, type ConsumerSource } from './impact.ts';
import { lineageConsumers, lineageService } from './public.ts';
import { columnLineageSchema, columnList, columnName, datasetLineageSchema, impactSchema } from './schemas.ts';

/** How many recipes a dataset lineage follows each way at most. */
const MAX_DEPTH = 100;

const direction = z.enum(['upstream', 'downstream', 'both']).default('both');

/**
 * The `lineage` router: how datasets and their columns flow through the organization's recipes,
 * and what changing some columns would touch downstream (datasets, recipes, and the consumers
 * other plugins contribute to `lineage.consumers`).
 */
export default definePlugin({
  deps: { enablement: kernelServices.pluginEnablement },
  init: ({ enablement }, ctx) => {
    const graph = ctx.useService(pipelineGraph);
    const catalog = ctx.useService(datasetCatalog);
    const sources = new Set<ConsumerSource>();
    const offered = (pluginId: string, orgId: number) => enablement.isEnabled(pluginId, orgId);
    ctx.provideExtensionPoint(lineageConsumers, ({ value, pluginId }) => {
      const source = { pluginId, source: value };
      sources.add(source);
      return () => void sources.delete(source);
    });
    /** The organization's lineage as it is now, once the dataset is known to be the organization's (else a 404 problem). */
    const readerFor = async (orgId: number, datasetId: number) => {
      await catalog.get(orgId, datasetId);
      return LineageReader.open(orgId, graph, catalog);
    };
    ctx.provideService(lineageService, { impact: async (orgId, datasetId, columns) => impactOf(await readerFor(orgId, datasetId), sources, offered, datasetId, columns) });

    const base = { security: 'bearer', orgScoped: true, capability: 'datasets.read' } as const;
    return {
      routes: [
        defineRoute({
          ...base,
          method: 'get',
          path: '/datasets/{id}',
          summary: 'Dataset lineage: the datasets and recipes upstream and downstream of a dataset',
          description:
            'The graph around the dataset through the recipes of its organization: a recipe writing it and that recipe\u2019s inputs are one step upstream (depth -1), a recipe reading it and its outputs one step downstream (depth 1). `depth` bounds the steps followed each way (default 10, at most 100). Edges run dataset → recipe for an input and recipe → dataset for an output.',
          request: {
            params: s.idParam('id'),
            query: z.object({ direction, depth: z.coerce.number().int().min(0).max(MAX_DEPTH).default(10) }),
          },
          responses: { 200: { description: 'The nodes and edges', schema: datasetLineageSchema } },
          handler: async ({ params, query, orgId }) => {
            const reader = await readerFor(orgId, params.id);
            const found = datasetLineage(reader.recipes, params.id, query.direction, query.depth);
            const recipes = new Map(reader.recipes.map((r) => [r.id, r]));
            const nodes = await Promise.all(
              found.nodes.map(async (node) => {
                if (node.kind === 'dataset') return { ...node, name: (await reader.dataset(node.ref_id))?.name ?? null, type: null };
                const { name, type } = recipes.get(node.ref_id)!;
                return { ...node, name, type };
              }),
            );
            return { nodes, edges: found.edges };
          },
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/datasets/{id}/columns/{column}',
          summary: 'Column lineage: the columns a column is computed from, and those computed from it',
          description:
            'Follows column origins through recipes, transitively, from a column of the dataset or one the recipe writing it will write: upstream, the input columns the column is computed from; downstream, the output columns of recipes reading the dataset that are computed from it. Each column is listed once, at its nearest depth, with the recipe and transformation of the step reaching it. A recipe whose origins are unknown (a handler type, or one that no longer plans) counts as deriving every output column from every input column. A column neither the dataset nor its recipe has is a 404.',
          request: { params: z.object({ id: s.pathId, column: columnName }), query: z.object({ direction }) },
          responses: { 200: { description: 'The columns reached', schema: columnLineageSchema } },
          handler: async ({ params, query, orgId }) => {
            const reader = await readerFor(orgId, params.id);
            if (!(await reader.columnsOf(params.id)).includes(params.column)) throw problems.notFound(`dataset ${params.id} has no column "${params.column}"`);
            const lineage = new ColumnLineage(reader);
            const start = [{ dataset_id: params.id, column: params.column }];
            const steps = [
              ...(query.direction === 'downstream' ? [] : await lineage.upstream(start)),
              ...(query.direction === 'upstream' ? [] : await lineage.downstream(start)),
            ];
            const items = await Promise.all(steps.map(async (step) => ({ ...step, dataset: (await reader.dataset(step.dataset_id))?.name ?? null })));
            return { items };
          },
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/datasets/{id}/impact',
          summary: 'Impact of changing columns of a dataset: downstream datasets, columns, recipes, jobs and other consumers',
          description:
            'What depends on the named columns (`columns`, comma-separated; every column when omitted): the downstream datasets and their columns computed from them (column lineage downstream), the recipes on the way, and what plugins report reading the dataset\u2019s or the affected columns (`consumers`, contributed to `lineage.consumers`; `jobs` are the consumers of kind `job`). A column the dataset lacks is a 400 naming `query.columns`.',
          request: { params: s.idParam('id'), query: z.object({ columns: columnList.optional().meta({ description: 'Column names, comma-separated', example: 'amount,customer_id' }) }) },
          responses: { 200: { description: 'The impact', schema: impactSchema } },
          handler: async ({ params, query, orgId }) => {
            const reader = await readerFor(orgId, params.id);
            const known = await reader.columnsOf(params.id);
            const unknown = query.columns?.find((name) => !known.includes(name));
            if (unknown !== undefined) throw problems.badRequest(`dataset ${params.id} has no column "${unknown}"`, [{ path: 'query.columns', message: `no column "${unknown}"` }]);
            return impactOf(reader, sources, offered, params.id, query.columns && [...new Set(query.columns)]);
          },
        }),
      ],
    };
  },
});
