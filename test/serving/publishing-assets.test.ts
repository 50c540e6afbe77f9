import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, type TestKernel, type TestResponse } from '../harness/index.ts';

const SERVICES = '/api/publishing/api-services';
const ASSETS = '/api/publishing/assets';

/**
 * A third-party plugin outside the repository adding its notebooks to the registry of published
 * assets (publishing.assets), as the shipped dashboards plugin does its dashboards: one notebook, in
 * organization 1 only.
 */
function writeBoardsPlugin(root: string) {
  fs.mkdirSync(path.join(root, 'boards'), { recursive: true });
  fs.mkdirSync(path.join(root, 'manifests'), { recursive: true });
  fs.writeFileSync(
    path.join(root, 'boards/index.ts'),
    `import { definePlugin } from 'data-platform/plugin-api';
import { publishedAssets } from 'data-platform/plugins/publishing';

export default definePlugin({
  deps: {},
  init: (_services, ctx) =>
    ctx.contribute(publishedAssets, {
      asset_type: 'notebook',
      list: async (orgId) =>
        orgId === 1 ? [{ asset_type: 'notebook', id: 7, name: 'Revenue notebook', project_id: 424242, status: 'published', published_by: null, published_at: '2020-01-01T00:00:00.000Z', url: '/notebooks/7' }] : [],
    }),
});
`,
  );
  fs.writeFileSync(path.join(root, 'manifests/boards.json'), JSON.stringify({ id: 'boards', version: '1.0.0', kind: 'extension', entry: '../boards/index.ts', depends_on: ['publishing'] }));
}

type Asset = { asset_type: string; id: number; name: string; project_id: number; status: string; published_by: number | null; published_at: string; url: string };
type Consumer = { kind: string; id: string; name: string; plugin_id: string; dataset_id: number; columns: string[]; details?: Record<string, unknown> };

describe.each(DIALECTS)('published assets and API Service lineage (%s)', (dialect) => {
  let t: TestKernel;
  const folder = tempDir('dp-assets-');
  let adminId: number;
  let shopProject: number;
  let otherProject: number;
  const ds: Record<string, number> = {};
  const svc: Record<string, { id: number; key: string }> = {};

  const ok = async <T = any>(res: Promise<TestResponse<T>>, status = 200) => {
    const answer = await res;
    expect(answer.status, answer.text).toBe(status);
    return answer.body;
  };
  const service = async (name: string, projectId: number, endpoints: unknown[], publish: boolean) => {
    const created = await ok(t.request('POST', SERVICES, { body: { project_id: projectId, name, key: name, endpoints } }), 201);
    if (publish) await ok(t.request('POST', `${SERVICES}/${created.id}/publish`));
    svc[name] = { id: created.id, key: created.key };
  };
  const assets = (query = '') => ok<{ items: Asset[]; next_cursor: string | null }>(t.request('GET', `${ASSETS}${query}`));
  const keysOf = (page: { items: Asset[] }) => page.items.map((a) => `${a.asset_type}:${a.name}`);
  /** The API Service endpoints an impact lists, as `key/endpoint: columns (status)`, sorted. */
  const endpointsImpacted = async (dataset: string, columns?: string) => {
    const impact = await ok<{ consumers: Consumer[] }>(t.request('GET', `/api/lineage/datasets/${ds[dataset]}/impact${columns ? `?columns=${columns}` : ''}`));
    return impact.consumers
      .filter((c) => c.kind === 'api_service_endpoint')
      .map((c) => `${c.name}: ${[...c.columns].sort().join(',')} (${c.details?.status})`)
      .sort();
  };
  const expectField = (res: TestResponse, path: string) => {
    expect(res.status, res.text).toBe(400);
    expect(res.body.errors?.map((e: { path: string }) => e.path), res.text).toContain(path);
  };

  beforeAll(async () => {
    writeBoardsPlugin(folder.dir);
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), path.join(folder.dir, 'manifests')] });
    adminId = (await ok(t.request('GET', '/api/me'))).user.id;
    shopProject = (await ok(t.request('POST', '/api/projects', { body: { key: 'SHOP', name: 'Shop' } }), 201)).id;
    otherProject = (await ok(t.request('POST', '/api/projects', { body: { key: 'OTHER', name: 'Other' } }), 201)).id;
    const dataset = async (name: string, columns: [string, string][]) => {
      ds[name] = (await ok(t.request('POST', '/api/datasets', { body: { name, project_id: shopProject, columns: columns.map(([n, type]) => ({ name: n, type })) } }), 201)).id;
    };
    await dataset('customers', [['id', 'integer'], ['region', 'string'], ['name', 'string'], ['email', 'string'], ['tier', 'string']]);
    await dataset('orders', [['id', 'integer'], ['customer_id', 'integer'], ['amount', 'number'], ['note', 'string']]);
    const model = await ok(t.request('POST', '/api/registry/imported-models', { body: { project_id: shopProject, name: 'scorer', task: 'regression' } }), 201);

    // Published in turn (newest last): shop, catalog, then other's; a draft and an unpublished one.
    await service('shop', shopProject, [
      { name: 'by-id', kind: 'lookup', config: { dataset_id: ds.customers, keys: ['id'], columns: ['name'], filters: ['region:ne:XX'] } },
      {
        name: 'big-orders',
        kind: 'sql',
        config: { query: 'select o.id, c.name from orders o join customers c on c.id = o.customer_id where o.amount > $1 -- a comment', params: [{ name: 'min', type: 'number' }] },
      },
      { name: 'score', kind: 'model', config: { model_id: model.id } },
    ], true);
    await service('catalog', shopProject, [{ name: 'everything', kind: 'sql', config: { query: 'select * from customers where id = $1', params: [{ name: 'id', type: 'integer' }] } }], true);
    await service('elsewhere', otherProject, [{ name: 'notes', kind: 'lookup', config: { dataset_id: ds.orders, keys: ['id'], columns: ['note'] } }], true);
    await service('sketch', shopProject, [{ name: 'all-of-it', kind: 'lookup', config: { dataset_id: ds.customers, keys: ['id'] } }], false);
    await service('retired', shopProject, [{ name: 'old', kind: 'lookup', config: { dataset_id: ds.orders, keys: ['id'], columns: ['amount'] } }], true);
    await ok(t.request('POST', `${SERVICES}/${svc.retired.id}/unpublish`));
  });
  afterAll(async () => {
    await t?.stop();
    folder.remove();
  });

  describe('GET /api/publishing/assets', () => {
    it('lists published API Services (not drafts, not unpublished ones) and contributed assets, newest published first', async () => {
      const all = await assets();
      expect(keysOf(all)).toEqual(['api_service:elsewhere', 'api_service:catalog', 'api_service:shop', 'notebook:Revenue notebook']);
      expect(all.next_cursor).toBeNull();
      const shop = all.items.find((a) => a.name === 'shop')!;
      expect(shop).toEqual({ asset_type: 'api_service', id: svc.shop.id, name: 'shop', project_id: shopProject, status: 'published', published_by: adminId, published_at: expect.any(String), url: '/api/service/shop' });
    });

    it('filters by asset_type and project_id', async () => {
      expect(keysOf(await assets('?asset_type=api_service'))).toEqual(['api_service:elsewhere', 'api_service:catalog', 'api_service:shop']);
      expect(keysOf(await assets('?asset_type=notebook'))).toEqual(['notebook:Revenue notebook']);
      expect(keysOf(await assets(`?project_id=${otherProject}`))).toEqual(['api_service:elsewhere']);
      expect(keysOf(await assets(`?asset_type=api_service&project_id=${shopProject}`))).toEqual(['api_service:catalog', 'api_service:shop']);
      expect((await assets('?project_id=999999')).items).toEqual([]);
    });

    it('pages with limit and cursor through the same list', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page = await assets(`?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
        expect(page.items.length).toBe(1);
        seen.push(...keysOf(page));
        cursor = page.next_cursor;
        pages += 1;
      } while (cursor);
      expect(pages).toBe(4);
      expect(seen).toEqual(keysOf(await assets()));
      const first = await assets('?asset_type=api_service&limit=2');
      expect(keysOf(first)).toEqual(['api_service:elsewhere', 'api_service:catalog']);
      expect(keysOf(await assets(`?asset_type=api_service&limit=2&cursor=${first.next_cursor}`))).toEqual(['api_service:shop']);
    });

    it('refuses an unknown asset_type naming the known ones, and bad paging, each naming its field', async () => {
      const unknown = await t.request('GET', `${ASSETS}?asset_type=report`);
      expectField(unknown, 'query.asset_type');
      expect(unknown.body.detail).toContain('api_service, dashboard, notebook');
      for (const hostile of ["x' or '1'='1", 'x"; drop table publishing_services; --', 'x /* c */ `y`', '__proto__', 'constructor', 'a\u0000b', 'a'.repeat(5000)]) {
        expectField(await t.request('GET', `${ASSETS}?asset_type=${encodeURIComponent(hostile)}`), 'query.asset_type');
      }
      expectField(await t.request('GET', `${ASSETS}?cursor=not-ours`), 'query.cursor');
      expectField(await t.request('GET', `${ASSETS}?cursor=${Buffer.from('{"__proto__":{"id":1}}').toString('base64url')}`), 'query.cursor');
      expectField(await t.request('GET', `${ASSETS}?limit=0`), 'query.limit');
      expectField(await t.request('GET', `${ASSETS}?limit=501`), 'query.limit');
      expectField(await t.request('GET', `${ASSETS}?project_id=abc`), 'query.project_id');
    });

    it('shows nothing of another organization, and none of a plugin disabled for the organization', async () => {
      const outsider = await t.outsider('assets-outsider');
      const theirs = await t.request('GET', ASSETS, { token: outsider.token });
      expect(theirs.status, theirs.text).toBe(200);
      expect(theirs.body.items).toEqual([]);
      expect((await t.request('GET', ASSETS, { token: outsider.token, headers: { 'x-org-id': '1' } })).status).toBe(403);

      await ok(t.request('PUT', '/api/plugins/boards/organizations/1', { body: { enabled: false } }));
      try {
        expect(keysOf(await assets())).toEqual(['api_service:elsewhere', 'api_service:catalog', 'api_service:shop']);
        const refused = await t.request('GET', `${ASSETS}?asset_type=notebook`);
        expectField(refused, 'query.asset_type');
        expect(refused.body.detail).toContain('known: api_service');
      } finally {
        await ok(t.request('PUT', '/api/plugins/boards/organizations/1', { body: { enabled: true } }));
      }
      expect(keysOf(await assets('?asset_type=notebook'))).toEqual(['notebook:Revenue notebook']);
    });
  });

  describe('lineage impact lists the API Service endpoints reading a dataset', () => {
    it('lists lookup and sql endpoints of every status with the columns they read; a model endpoint reads none', async () => {
      expect(await endpointsImpacted('customers')).toEqual([
        'catalog/everything: email,id,name,region,tier (published)',
        'shop/big-orders: id,name (published)',
        'shop/by-id: id,name,region (published)',
        'sketch/all-of-it: email,id,name,region,tier (draft)',
      ]);
      expect(await endpointsImpacted('orders')).toEqual(['elsewhere/notes: id,note (published)', 'retired/old: amount,id (unpublished)', 'shop/big-orders: amount,customer_id,id (published)']);
      const impact = await ok<{ consumers: Consumer[] }>(t.request('GET', `/api/lineage/datasets/${ds.customers}/impact?columns=region`));
      expect(impact.consumers).toContainEqual({
        kind: 'api_service_endpoint',
        id: `${svc.shop.id}/by-id`,
        name: 'shop/by-id',
        plugin_id: 'publishing',
        dataset_id: ds.customers,
        columns: ['region'],
        details: { service_id: svc.shop.id, key: 'shop', endpoint: 'by-id', status: 'published' },
      });
      expect(impact.consumers.some((c) => c.name === 'shop/score')).toBe(false);
    });

    it('lists none in an organization the publishing plugin is disabled for', async () => {
      await ok(t.request('PUT', '/api/plugins/publishing/organizations/1', { body: { enabled: false } }));
      try {
        expect(await endpointsImpacted('customers')).toEqual([]);
        expect(await endpointsImpacted('orders')).toEqual([]);
      } finally {
        await ok(t.request('PUT', '/api/plugins/publishing/organizations/1', { body: { enabled: true } }));
      }
      expect(await endpointsImpacted('orders', 'note')).toEqual(['elsewhere/notes: note (published)']);
    });

    it('omits an endpoint when the columns asked about are none it reads (a column read in WHERE counts)', async () => {
      expect(await endpointsImpacted('customers', 'tier')).toEqual(['catalog/everything: tier (published)', 'sketch/all-of-it: tier (draft)']);
      expect(await endpointsImpacted('orders', 'note')).toEqual(['elsewhere/notes: note (published)']);
      expect(await endpointsImpacted('orders', 'amount')).toEqual(['retired/old: amount (unpublished)', 'shop/big-orders: amount (published)']);
    });

    it.runIf(dialect === 'sqlite')('counts every column of the datasets a query only SQLite reads reads (Postgres\u2019s parser cannot tell its columns)', async () => {
      await service('brackets', shopProject, [{ name: 'names', kind: 'sql', config: { query: 'select [name] from customers where `id` = $1', params: [{ name: 'id', type: 'integer' }] } }], false);
      expect(await endpointsImpacted('customers', 'tier')).toContain('brackets/names: tier (draft)');
      await ok(t.request('DELETE', `${SERVICES}/${svc.brackets.id}`), 204);
    });

    it('counts the columns a data API key fixes as read by the lookups it may call, while the key is active', async () => {
      const key = await ok(t.request('POST', `${SERVICES}/${svc.shop.id}/keys`, { body: { name: 'gold only', allowed_endpoints: ['by-id'], fixed_params: { tier: 'gold' } } }), 201);
      expect(await endpointsImpacted('customers', 'tier')).toContain('shop/by-id: tier (published)');
      await ok(t.request('DELETE', `${SERVICES}/${svc.shop.id}/keys/${key.id}`), 204);
      expect(await endpointsImpacted('customers', 'tier')).not.toContain('shop/by-id: tier (published)');
    });

    it('forgets a deleted service, in the impact and in the assets', async () => {
      await service('doomed', shopProject, [{ name: 'peek', kind: 'lookup', config: { dataset_id: ds.orders, keys: ['id'], columns: ['note'] } }], true);
      expect(await endpointsImpacted('orders', 'note')).toContain('doomed/peek: note (published)');
      expect(keysOf(await assets('?asset_type=api_service'))).toContain('api_service:doomed');
      await ok(t.request('DELETE', `${SERVICES}/${svc.doomed.id}`), 204);
      expect(await endpointsImpacted('orders', 'note')).toEqual(['elsewhere/notes: note (published)']);
      expect(keysOf(await assets('?asset_type=api_service'))).not.toContain('api_service:doomed');
    });
  });
});
