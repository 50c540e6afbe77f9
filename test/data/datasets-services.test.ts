import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, writeManifest, type TestKernel } from '../harness/index.ts';

/**
 * The datasets plugin's services `datasets.contracts` and `datasets.catalog`'s `rows`, as a plugin
 * depending on datasets uses them (fixture `datasets-consumer`): they answer what the routes answer.
 */
describe.each(DIALECTS)('datasets services for other plugins (%s)', (dialect) => {
  let t: TestKernel;
  let manifests: ReturnType<typeof tempDir>;
  let projectId: number;
  const csv = (body: string) => ({ body, headers: { 'content-type': 'text/csv' } });
  const viaService = (method: string, route: string, token?: string) => t.request(method, `/api/datasets-consumer${route}`, { token });

  beforeAll(async () => {
    manifests = tempDir();
    writeManifest(manifests.dir, { id: 'datasets-consumer', router: { prefix: '/api/datasets-consumer', tag: 'datasets-consumer' }, depends_on: ['datasets'] }, 'datasets-consumer');
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), manifests.dir] });
    projectId = (await t.request('POST', '/api/projects', { body: { key: 'SVC', name: 'Services' } })).body.id;
  });
  afterAll(async () => {
    await t?.stop();
    manifests?.remove();
  });

  it('reads, captures and reports drift as the contract routes do', async () => {
    const dataset = await t.request('POST', '/api/datasets', { body: { name: 'orders', project_id: projectId } });
    const id = dataset.body.id;
    const drift = async () => {
      const [service, route] = [await viaService('GET', `/${id}/drift`), await t.request('GET', `/api/datasets/${id}/drift`)];
      expect(service.status).toBe(200);
      expect(service.body).toEqual(route.body);
      return service.body;
    };

    // No columns yet: nothing to capture, on either path.
    expect((await viaService('POST', `/${id}/contract`)).status).toBe(422);
    expect((await t.request('POST', `/api/datasets/${id}/contract`)).status).toBe(422);

    expect((await t.request('POST', `/api/datasets/${id}/data`, csv('id,amount,note\n1,9.5,first\n'))).status).toBe(200);
    expect(await drift()).toEqual({ status: 'no-contract', contract_version: null, dataset_version: expect.any(Number), changes: [] });
    expect((await viaService('GET', `/${id}/contract`)).body).toEqual({ contract: null });

    const captured = await viaService('POST', `/${id}/contract`);
    expect(captured.status).toBe(201);
    expect(captured.body).toMatchObject({ dataset_id: id, version: 1, is_current: true, columns: [{ name: 'id', type: 'integer' }, { name: 'amount', type: 'number' }, { name: 'note', type: 'string' }] });
    expect((await viaService('GET', `/${id}/contract`)).body.contract).toEqual(captured.body);
    expect((await t.request('GET', `/api/datasets/${id}/contract`)).body).toEqual(captured.body);
    expect(await drift()).toMatchObject({ status: 'ok', contract_version: 1, changes: [] });

    // A replace upload that drops `note` and adds `shipped`: one breaking and one additive change.
    expect((await t.request('POST', `/api/datasets/${id}/data?mode=replace`, csv('id,amount,shipped\n1,9.5,true\n'))).status).toBe(200);
    const after = await drift();
    expect(after.status).toBe('breaking');
    expect(after.changes).toEqual([
      { column: 'note', change: 'removed', from: 'string', severity: 'breaking' },
      { column: 'shipped', change: 'added', to: 'boolean', severity: 'additive' },
    ]);
  });

  it('keeps contracts inside their organization', async () => {
    const dataset = await t.request('POST', '/api/datasets', { body: { name: 'private_orders', project_id: projectId, columns: [{ name: 'id', type: 'integer' }] } });
    const { token } = await t.outsider('svc-outsider');
    for (const [method, route] of [['GET', 'drift'], ['GET', 'contract'], ['POST', 'contract']]) {
      expect((await viaService(method, `/${dataset.body.id}/${route}`, token)).status, `${method} ${route}`).toBe(404);
    }
  });

  describe('rows', () => {
    let id: number;
    let member: string;
    let stranger: string;
    const both = async (query: string, token: string) => {
      const [service, route] = [await viaService('GET', `/${id}/rows?${query}`, token), await t.request('GET', `/api/datasets/${id}/rows?${query}`, { token })];
      expect(service.status, JSON.stringify(service.body)).toBe(route.status);
      // A problem names its own request; everything else must match.
      const { request_id: _service, ...answer } = service.body;
      const { request_id: _route, ...expected } = route.body;
      expect(answer).toEqual(expected);
      return service;
    };

    beforeAll(async () => {
      const dataset = await t.request('POST', '/api/datasets', {
        body: { name: 'customers', project_id: projectId, columns: [{ name: 'id', type: 'integer' }, { name: 'country', type: 'string' }, { name: 'email', type: 'string', pii: true }] },
      });
      id = dataset.body.id;
      expect((await t.request('POST', `/api/datasets/${id}/data`, csv('id,country,email\n1,FR,a@example.test\n2,DE,b@example.test\n3,FR,c@example.test\n4,IT,\n'))).status).toBe(200);
      const group = await t.request('POST', '/api/groups', { body: { name: 'svc-fr', capabilities: [] } });
      expect((await t.request('POST', `/api/datasets/${id}/row-policies`, { body: { group_id: group.body.id, filters: ['country:eq:FR'] } })).status).toBe(201);
      // Editors read datasets but lack datasets.pii.read.
      const user = await t.userToken('editor', 'svc-member');
      expect((await t.request('POST', `/api/groups/${group.body.id}/members`, { body: { user_id: user.id } })).status).toBe(201);
      member = user.token;
      stranger = (await t.userToken('editor', 'svc-stranger')).token;
    });

    it('masks PII and applies row policies, as GET /rows does', async () => {
      const page = await both('limit=10', member);
      expect(page.body.rows).toEqual([
        { id: 1, country: 'FR', email: '***' },
        { id: 3, country: 'FR', email: '***' },
      ]);
      expect(page.body.columns.find((c: { name: string }) => c.name === 'email').masked).toBe(true);
      expect((await both('limit=10', stranger)).body.rows).toEqual([]); // in no group of the dataset's policies
      // Platform admins hold datasets.pii.read and bypass row policies.
      const all = await both('limit=10', t.adminToken);
      expect(all.body.rows.map((r: { email: string | null }) => r.email)).toEqual(['a@example.test', 'b@example.test', 'c@example.test', null]);
    });

    it('filters, sorts, selects columns and pages as GET /rows does', async () => {
      expect((await both('filter=id:gt:1&sort=-id&columns=id,email', member)).body.rows).toEqual([{ id: 3, email: '***' }]);
      const first = await both('limit=1', member);
      expect(first.body.next_cursor).toEqual(expect.any(String));
      expect((await both(`limit=1&cursor=${first.body.next_cursor}`, member)).body).toMatchObject({ rows: [{ id: 3 }], next_cursor: null });
    });

    it('refuses what GET /rows refuses', async () => {
      expect((await both('filter=email:eq:a@example.test', member)).status).toBe(403); // a masked column
      expect((await both('filter=nope:eq:1', member)).status).toBe(400);
      expect((await both('cursor=garbage', member)).status).toBe(400);
      // The route's schema bounds the page; the service holds its callers to the same bound.
      const huge = await viaService('GET', `/${id}/rows?limit=5000`, member);
      expect(huge.status).toBe(400);
      expect(huge.body.errors[0].path).toBe('query.limit');
      const { token } = await t.outsider('svc-rows-outsider');
      expect((await both('limit=10', token)).status).toBe(404);
    });
  });
});
