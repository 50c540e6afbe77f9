import { expect } from 'vitest';
import type { TestKernel } from '../harness/index.ts';

/** The columns every customers fixture has: email is PII. */
const CUSTOMER_COLUMNS = [
  { name: 'id', type: 'integer' },
  { name: 'region', type: 'string' },
  { name: 'name', type: 'string' },
  { name: 'email', type: 'string', pii: true },
];

/** A project (by key) holding a `customers` dataset with these rows, and `extra` columns past id, region, name and email. */
export async function customersFixture(t: TestKernel, projectKey: string, rows: Record<string, unknown>[], extra: { name: string; type: string; pii?: boolean }[] = []) {
  const project = await t.request('POST', '/api/projects', { body: { key: projectKey, name: projectKey } });
  expect(project.status, project.text).toBe(201);
  const dataset = await t.request('POST', '/api/datasets', { body: { name: 'customers', project_id: project.body.id, columns: [...CUSTOMER_COLUMNS, ...extra] } });
  expect(dataset.status, dataset.text).toBe(201);
  const loaded = await t.request('POST', `/api/datasets/${dataset.body.id}/rows`, { body: rows });
  expect(loaded.status, loaded.text).toBe(200);
  return { projectId: project.body.id as number, customersId: dataset.body.id as number };
}

/** A sql endpoint `by-region` over the fixture: `columns` of the customers of a region ($1, required) from an id on ($2, default 0). */
export const byRegionSql = (columns: string, config: Record<string, unknown> = {}) => ({
  name: 'by-region',
  kind: 'sql',
  config: { query: `select ${columns} from customers where region = $1 and id >= $2 order by id`, params: [{ name: 'region', type: 'string', required: true }, { name: 'min_id', type: 'integer', default: 0 }], ...config },
});
