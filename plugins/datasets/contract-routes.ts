import { z } from 'zod';
import { defineRoute, identitySchemas as s, problems, reply } from '../../kernel/plugin-api.ts';
import { DATA_COLUMN_TYPES } from '../../storage/index.ts';
import type { ContractService } from './contracts.ts';
import type { DatasetStore } from './dataset-store.ts';
import type { DatasetContracts } from './public.ts';

const contractSchema = z
  .object({
    id: z.number().int(),
    org_id: z.number().int(),
    dataset_id: z.number().int(),
    version: z.number().int(),
    columns: z.array(z.object({ name: z.string(), type: z.enum(DATA_COLUMN_TYPES) })),
    is_current: z.boolean(),
    created_by: z.number().int().nullable(),
    created_at: z.string(),
  })
  .meta({ id: 'SchemaContract' });

const driftSchema = z
  .object({
    status: z.enum(['ok', 'additive', 'breaking', 'no-contract']),
    contract_version: z.number().int().nullable(),
    dataset_version: z.number().int(),
    changes: z.array(
      z.object({
        column: z.string(),
        change: z.enum(['added', 'removed', 'type_changed']),
        from: z.enum(DATA_COLUMN_TYPES).optional(),
        to: z.enum(DATA_COLUMN_TYPES).optional(),
        severity: z.enum(['additive', 'breaking']),
      }),
    ),
  })
  .meta({ id: 'SchemaDrift' });

const idParams = s.idParam('id');
const base = { security: 'bearer', orgScoped: true } as const;

/**
 * Schema contracts and drift of a dataset (spec §2.6, §3.3). `operations` is the `datasets.contracts`
 * service itself, so the routes and the service answer alike.
 */
export function contractRoutes({ store, contracts, operations }: { store: DatasetStore; contracts: ContractService; operations: DatasetContracts }) {
  return [
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}/contract',
      summary: 'The current schema contract of a dataset',
      description:
        'The newest captured contract: the columns and types the dataset promised its consumers. A dataset without a contract is a 404 (capture one with POST /api/datasets/{id}/contract).',
      capability: 'datasets.read',
      request: { params: idParams },
      responses: { 200: { description: 'The current contract', schema: contractSchema } },
      handler: async ({ params, orgId }) => {
        const contract = await operations.current(orgId, params.id);
        if (!contract) throw problems.notFound(`dataset ${params.id} has no contract yet: capture one with POST /api/datasets/${params.id}/contract`);
        return contract;
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}/contract/history',
      summary: 'Every contract version of a dataset, newest first',
      description:
        'Every captured contract version, newest first, so a consumer can see how the promised schema changed over time.',
      capability: 'datasets.read',
      request: { params: idParams },
      responses: { 200: { description: 'Contracts', schema: z.array(contractSchema) } },
      handler: async ({ params, orgId }) => contracts.history(await store.get(orgId, params.id)),
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/{id}/contract',
      summary: 'Capture the live schema as the new current contract (a new version; history kept)',
      description:
        'Records the dataset\'s current columns as a new contract version; earlier versions stay in the history. Drift is measured against the newest version.',
      capability: 'datasets.write',
      request: { params: idParams },
      responses: { 201: { description: 'The new current contract', schema: contractSchema }, 422: { description: 'The dataset has no columns yet: there is no schema to capture' } },
      handler: async ({ params, orgId, principal, audit }) => {
        const contract = await operations.capture(orgId, params.id, principal.userId);
        await audit.record({ action: 'dataset.contract.capture', targetType: 'dataset', targetId: contract.dataset_id, details: { version: contract.version } });
        return reply(201, contract);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}/drift',
      summary: 'Drift of the live schema from the current contract: each change, additive or breaking',
      description:
        'Compares the live schema with the current contract, column by column: additions are additive, removals and type changes are breaking. Without a contract there is nothing to compare (404).',
      capability: 'datasets.read',
      request: { params: idParams },
      responses: { 200: { description: 'The drift', schema: driftSchema } },
      handler: async ({ params, orgId }) => operations.drift(orgId, params.id),
    }),
  ];
}
