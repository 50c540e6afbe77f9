import { expect } from 'vitest';
import type { TestKernel } from './test-kernel.ts';

/** The README's data section, which its later walkthroughs build on: project 1, dataset 1 (orders) with three rows. */
export async function createReadmeOrders(t: TestKernel): Promise<void> {
  const post = (path: string, body: unknown) => t.request('POST', path, { body });
  expect((await post('/api/projects', { key: 'SALES', name: 'Sales' })).body.id).toBe(1);
  expect((await post('/api/datasets', { name: 'orders', project_id: 1 })).body.id).toBe(1);
  const csv = 'id,amount,country,paid,day\n1,10.5,FR,true,2024-01-02\n2,20,DE,false,2024-01-03\n';
  expect((await t.request('POST', '/api/datasets/1/data?mode=replace', { body: csv, headers: { 'content-type': 'text/csv' } })).status).toBe(200);
  expect((await post('/api/datasets/1/rows', [{ id: 3, amount: 7, country: 'IT', paid: true, day: '2024-03-01' }])).status).toBe(200);
}
