import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

describe.each(DIALECTS)('projects (%s)', (dialect) => {
  let t: TestKernel;
  let viewer: string;
  let otherOrgAdmin: string;
  let otherOrgId: number;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    viewer = (await t.userToken('viewer')).token;
    ({ orgId: otherOrgId, token: otherOrgAdmin } = await t.outsider('other-editor'));
  });
  afterAll(async () => t?.stop());

  it('creates, reads, renames and deletes a project', async () => {
    const created = await t.request('POST', '/api/projects', { body: { key: 'SALES', name: 'Sales', description: 'Quarterly numbers' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ key: 'SALES', name: 'Sales', description: 'Quarterly numbers', org_id: 1 });
    const id = created.body.id;
    expect((await t.request('GET', `/api/projects/${id}`)).body.key).toBe('SALES');
    const renamed = await t.request('PATCH', `/api/projects/${id}`, { body: { name: 'Sales EMEA' } });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ key: 'SALES', name: 'Sales EMEA' });
    expect((await t.request('DELETE', `/api/projects/${id}`)).status).toBe(204);
    expect((await t.request('GET', `/api/projects/${id}`)).status).toBe(404);
    const audit = await t.request('GET', `/api/audit?target=project:${id}`);
    expect(audit.body.items.map((e: { action: string }) => e.action)).toEqual(['project.delete', 'project.update', 'project.create']);
  });

  it('refuses bad keys and names with the failing field, and duplicate keys with 409', async () => {
    for (const key of ['sales', 'S', '1ABC', 'SALES-EU', 'A'.repeat(33)]) {
      const res = await t.request('POST', '/api/projects', { body: { key, name: 'x' } });
      expect(res.status, key).toBe(400);
      expect(res.body.errors[0].path).toBe('body.key');
    }
    expect((await t.request('POST', '/api/projects', { body: { key: 'EMPTY_NAME', name: '  ' } })).body.errors[0].path).toBe('body.name');
    expect((await t.request('POST', '/api/projects', { body: { key: 'DUP', name: 'First' } })).status).toBe(201);
    const duplicate = await t.request('POST', '/api/projects', { body: { key: 'DUP', name: 'Second' } });
    expect(duplicate.status).toBe(409);
    expect((await t.request('GET', '/api/projects?search=second')).body.total).toBe(0);
  });

  it('pages and searches by key and name, treating % and _ literally', async () => {
    for (const [key, name] of [['ALPHA', 'Marketing 100%'], ['BETA', 'Finance'], ['GAMMA', 'market_data']]) {
      await t.request('POST', '/api/projects', { body: { key, name } });
    }
    const found = await t.request('GET', '/api/projects?search=MARKET');
    expect(found.body.items.map((p: { key: string }) => p.key).sort()).toEqual(['ALPHA', 'GAMMA']);
    expect((await t.request('GET', '/api/projects?search=100%25')).body.items.map((p: { key: string }) => p.key)).toEqual(['ALPHA']);
    expect((await t.request('GET', '/api/projects?search=t_d')).body.items.map((p: { key: string }) => p.key)).toEqual(['GAMMA']);
    const page = await t.request('GET', '/api/projects?limit=2&offset=1');
    expect(page.body.items).toHaveLength(2);
    expect(page.body.total).toBeGreaterThanOrEqual(4);
    expect((await t.request('GET', '/api/projects?limit=0')).status).toBe(400);
  });

  it('lets viewers read but not write', async () => {
    const project = (await t.request('POST', '/api/projects', { body: { key: 'READONLY', name: 'Read only' } })).body;
    expect((await t.request('GET', `/api/projects/${project.id}`, { token: viewer })).status).toBe(200);
    expect((await t.request('POST', '/api/projects', { token: viewer, body: { key: 'NOPE', name: 'x' } })).status).toBe(403);
    expect((await t.request('PATCH', `/api/projects/${project.id}`, { token: viewer, body: { name: 'x' } })).status).toBe(403);
    expect((await t.request('DELETE', `/api/projects/${project.id}`, { token: viewer })).status).toBe(403);
    expect((await t.request('GET', '/api/projects', { token: null })).status).toBe(401);
  });

  it('keeps organizations apart', async () => {
    const mine = (await t.request('POST', '/api/projects', { body: { key: 'PRIVATE', name: 'Private' } })).body;
    const theirs = await t.request('POST', '/api/projects', { token: otherOrgAdmin, body: { key: 'PRIVATE', name: 'Same key, other org' } });
    expect(theirs.status).toBe(201);
    expect(theirs.body.org_id).toBe(otherOrgId);
    const listed = await t.request('GET', '/api/projects?limit=500', { token: otherOrgAdmin });
    expect(listed.body.items.map((p: { id: number }) => p.id)).toEqual([theirs.body.id]);
    for (const [method, body] of [['GET', undefined], ['PATCH', { name: 'hijacked' }], ['DELETE', undefined]] as const) {
      expect((await t.request(method, `/api/projects/${mine.id}`, { token: otherOrgAdmin, body })).status, method).toBe(404);
      expect((await t.request(method, `/api/projects/${mine.id}`, { token: otherOrgAdmin, body, headers: { 'x-org-id': '1' } })).status, method).toBe(403);
    }
    expect((await t.request('GET', `/api/projects/${mine.id}`)).body.name).toBe('Private');
  });

  it('refuses to delete a project that holds datasets (a guard the datasets plugin contributes)', async () => {
    const project = (await t.request('POST', '/api/projects', { body: { key: 'GUARDED', name: 'Guarded' } })).body;
    const dataset = (await t.request('POST', '/api/datasets', { body: { name: 'guarded_data', project_id: project.id } })).body;
    const refused = await t.request('DELETE', `/api/projects/${project.id}`);
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toMatch(/holds 1 dataset/);
    expect((await t.request('GET', `/api/projects/${project.id}`)).status).toBe(200);
    expect((await t.request('DELETE', `/api/datasets/${dataset.id}`)).status).toBe(204);
    expect((await t.request('DELETE', `/api/projects/${project.id}`)).status).toBe(204);
  });
});
