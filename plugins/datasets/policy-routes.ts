import { z } from 'zod';
import { defineRoute, identitySchemas as s, reply } from '../../kernel/plugin-api.ts';
import type { DatasetStore } from './dataset-store.ts';
import type { RowPolicies } from './row-policies.ts';

const policySchema = z
  .object({
    id: z.number().int(),
    org_id: z.number().int(),
    dataset_id: z.number().int(),
    group_id: z.number().int(),
    filters: z.array(z.string()),
    description: z.string().nullable(),
    created_at: z.string(),
  })
  .meta({ id: 'RowPolicy' });

const base = { security: 'bearer', orgScoped: true } as const;

/** Row policies of a dataset, managed by organization admins. */
export function policyRoutes({ store, policies }: { store: DatasetStore; policies: RowPolicies }) {
  return [
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}/row-policies',
      summary: 'Row policies of a dataset',
      description:
        'Each policy names a group and the filters its members\' row reads are limited to. For organization admins.',
      capability: 'org.admin',
      request: { params: s.idParam('id') },
      responses: { 200: { description: 'Policies', schema: z.array(policySchema) } },
      handler: async ({ params, orgId }) => policies.list(await store.get(orgId, params.id)),
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/{id}/row-policies',
      summary: 'Let members of a group see only the rows matching these filters',
      description: 'Filters use the language of GET /rows (`column:operator:value`) and are ANDed; a member of several policies\u2019 groups sees rows matching any of them; a caller in none of the groups sees no rows; `datasets.policies.bypass` sees all.',
      capability: 'org.admin',
      request: {
        params: s.idParam('id'),
        body: z.object({ group_id: s.recordId, filters: z.array(z.string().min(3)).min(1).max(50), description: z.string().max(2000).nullable().optional() }),
      },
      responses: { 201: { description: 'The policy', schema: policySchema }, 422: { description: 'The group (`group_id`) does not exist in the organization' } },
      handler: async ({ params, body, orgId, audit }) => {
        const dataset = await store.get(orgId, params.id);
        const policy = await policies.create(dataset, body);
        await audit.record({ security: true, action: 'dataset.row_policy.create', targetType: 'dataset', targetId: dataset.id, details: { policy_id: policy.id, group_id: policy.group_id, filters: policy.filters } });
        return reply(201, policy);
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/{id}/row-policies/{policy_id}',
      summary: 'Remove a row policy',
      description:
        'The group\'s members see the dataset\'s rows unfiltered again, unless another policy applies to them. A policy of another dataset is a 404.',
      capability: 'org.admin',
      request: { params: z.object({ id: s.pathId, policy_id: s.pathId }) },
      responses: { 204: { description: 'Removed' } },
      handler: async ({ params, orgId, audit }) => {
        const dataset = await store.get(orgId, params.id);
        await policies.remove(dataset, params.policy_id);
        await audit.record({ security: true, action: 'dataset.row_policy.delete', targetType: 'dataset', targetId: dataset.id, details: { policy_id: params.policy_id } });
        return reply(204);
      },
    }),
  ];
}
