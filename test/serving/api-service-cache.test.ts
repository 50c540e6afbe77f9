import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PII_MASK } from '../../plugins/datasets/public.ts';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

const BASE = '/api/publishing/api-services';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Cached answers of API Service endpoints (`cache_ttl_s`), and the services and keys calls keep in memory. A cached answer is told apart from a
 * fresh one by writing to the dataset's table behind the platform's back (its version unchanged):
 * a fresh answer sees that write, a cached one does not.
 */
describe.each(DIALECTS)('API Service answer cache (%s)', (dialect) => {
  let t: TestKernel;
  let projectId: number;
  let datasetId: number;
  let editor: { id: number; token: string };
  let groupId: number;

  const call = (service: string, endpoint: string, key: string, query: string) => t.request('GET', `/api/service/${service}/${endpoint}?${query}`, { token: null, headers: { 'x-api-key': key } });
  /** Renames customer `id` in the table itself: the platform does not learn of it (no new version). */
  const renameBehindTheBack = async (id: number, name: string) => {
    const { storage } = t.kernel;
    const { table_name: table, org_id: orgId } = await storage.db.selectFrom('datasets').select(['table_name', 'org_id']).where('id', '=', datasetId).executeTakeFirstOrThrow();
    await sql`update ${storage.dataTables.ref(Number(orgId), table as string)} set name = ${name} where id = ${id}`.execute(storage.db);
  };
  /** A published service with one endpoint, and a key of it, both by `token`'s user. */
  const service = async (key: string, endpoint: Record<string, unknown>, token?: string) => {
    const created = await t.request('POST', BASE, { token, body: { project_id: projectId, name: key, key, endpoints: [endpoint] } });
    expect(created.status, created.text).toBe(201);
    expect((await t.request('POST', `${BASE}/${created.body.id}/publish`, { token })).status).toBe(200);
    const minted = await t.request('POST', `${BASE}/${created.body.id}/keys`, { token, body: { name: 'consumer' } });
    expect(minted.status, minted.text).toBe(201);
    return { id: created.body.id as number, secret: minted.body.key as string };
  };
  const lookup = (ttl: number) => ({ name: 'customer', kind: 'lookup', config: { dataset_id: datasetId, keys: ['id'], columns: ['id', 'region', 'name'], cache_ttl_s: ttl } });

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    projectId = (await t.request('POST', '/api/projects', { body: { key: 'CACHE', name: 'Cache' } })).body.id;
    const columns = [
      { name: 'id', type: 'integer' },
      { name: 'region', type: 'string' },
      { name: 'name', type: 'string' },
    ];
    datasetId = (await t.request('POST', '/api/datasets', { body: { name: 'customers', project_id: projectId, columns } })).body.id;
    const rows = [
      { id: 1, region: 'EU', name: 'Ada' },
      { id: 2, region: 'US', name: 'Bob' },
    ];
    expect((await t.request('POST', `/api/datasets/${datasetId}/rows`, { body: rows })).status).toBe(200);
    editor = await t.userToken('editor', 'cache-publisher');
    const group = await t.request('POST', '/api/groups', { body: { name: 'cache-eu', capabilities: [] } });
    groupId = group.body.id;
    expect((await t.request('POST', `/api/groups/${groupId}/members`, { body: { user_id: editor.id } })).status).toBe(201);
  });
  afterAll(() => t?.stop());

  it('serves a lookup again from the cache until the data changes, then the new data', async () => {
    const { secret } = await service('cached-lookup', lookup(300));
    expect((await call('cached-lookup', 'customer', secret, 'id=1')).body.rows).toEqual([{ id: 1, region: 'EU', name: 'Ada' }]);
    await renameBehindTheBack(1, 'Hidden');
    // Same data version: the answer kept is served.
    expect((await call('cached-lookup', 'customer', secret, 'id=1')).body.rows).toEqual([{ id: 1, region: 'EU', name: 'Ada' }]);
    // Another input is another entry.
    expect((await call('cached-lookup', 'customer', secret, 'id=2')).body.rows).toEqual([{ id: 2, region: 'US', name: 'Bob' }]);
    // A write through the platform makes a new version: never served stale.
    expect((await t.request('POST', `/api/datasets/${datasetId}/rows`, { body: [{ id: 3, region: 'EU', name: 'Cyd' }] })).status).toBe(200);
    expect((await call('cached-lookup', 'customer', secret, 'id=1')).body.rows).toEqual([{ id: 1, region: 'EU', name: 'Hidden' }]);
    await renameBehindTheBack(1, 'Ada');
  });

  it('answers a cached answer with the headers of any answer, and HEAD with the same headers and no body', async () => {
    const { secret } = await service('headed-lookup', lookup(300));
    const first = await call('headed-lookup', 'customer', secret, 'id=2');
    const again = await t.request('GET', '/api/service/headed-lookup/customer?id=2', { token: null, headers: { 'x-api-key': secret, 'x-request-id': 'client-chosen.1' } });
    expect(again.text).toBe(first.text);
    expect(again.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(Number(again.headers.get('content-length'))).toBe(Buffer.byteLength(again.text));
    expect(again.headers.get('x-request-id')).toBe('client-chosen.1');
    expect(again.headers.get('x-content-type-options')).toBe('nosniff');
    expect(again.headers.get('cache-control')).toBe('no-store');
    expect(again.headers.get('content-security-policy')).toContain("default-src 'none'");
    const head = await t.request('HEAD', '/api/service/headed-lookup/customer?id=2', { token: null, headers: { 'x-api-key': secret } });
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    expect(head.headers.get('content-length')).toBe(again.headers.get('content-length'));
  });

  it('does not cache an endpoint without cache_ttl_s, and lets an answer expire after its TTL', async () => {
    const uncached = await service('uncached-lookup', lookup(0));
    const shortLived = await service('short-lookup', lookup(1));
    expect((await call('uncached-lookup', 'customer', uncached.secret, 'id=2')).body.rows[0].name).toBe('Bob');
    expect((await call('short-lookup', 'customer', shortLived.secret, 'id=2')).body.rows[0].name).toBe('Bob');
    await renameBehindTheBack(2, 'Bobby');
    expect((await call('uncached-lookup', 'customer', uncached.secret, 'id=2')).body.rows[0].name).toBe('Bobby');
    expect((await call('short-lookup', 'customer', shortLived.secret, 'id=2')).body.rows[0].name).toBe('Bob');
    await sleep(1100);
    expect((await call('short-lookup', 'customer', shortLived.secret, 'id=2')).body.rows[0].name).toBe('Bobby');
    await renameBehindTheBack(2, 'Bob');
  });

  it('caches a sql endpoint by the versions of the datasets its query reads, and by its inputs', async () => {
    const endpoint = { name: 'by-region', kind: 'sql', config: { query: 'select id, name from customers where region = $1 order by id', params: [{ name: 'region', type: 'string', required: true }], cache_ttl_s: 300 } };
    const { secret } = await service('cached-sql', endpoint);
    const names = async (region: string) => (await call('cached-sql', 'by-region', secret, `region=${region}`)).body.rows.map((r: { name: string }) => r.name);
    expect(await names('EU')).toEqual(['Ada', 'Cyd']);
    await renameBehindTheBack(3, 'Hidden');
    expect(await names('EU')).toEqual(['Ada', 'Cyd']);
    // A quote in the input is an input like any other: its own entry, bound, never spliced.
    const quoted = await call('cached-sql', 'by-region', secret, `region=${encodeURIComponent("EU' or '1'='1")}`);
    expect(quoted.status, quoted.text).toBe(200);
    expect(quoted.body.rows).toEqual([]);
    expect((await t.request('POST', `/api/datasets/${datasetId}/rows`, { body: [{ id: 4, region: 'EU', name: 'Dee' }] })).status).toBe(200);
    expect(await names('EU')).toEqual(['Ada', 'Hidden', 'Dee']);
    await renameBehindTheBack(3, 'Cyd');
  });

  it('answers anew when the row policies applying to the publisher change, with the data unchanged', async () => {
    const { secret } = await service('policy-lookup', { ...lookup(300), config: { ...lookup(300).config, keys: ['region'] } }, editor.token);
    const ids = async () => (await call('policy-lookup', 'customer', secret, 'region=EU')).body.rows.map((r: { id: number }) => r.id);
    expect(await ids()).toEqual([1, 3, 4]);
    const policy = await t.request('POST', `/api/datasets/${datasetId}/row-policies`, { body: { group_id: groupId, filters: ['id:lt:3'] } });
    expect(policy.status, policy.text).toBe(201);
    expect(await ids()).toEqual([1]);
    expect((await t.request('DELETE', `/api/datasets/${datasetId}/row-policies/${policy.body.id}`)).status).toBe(204);
    expect(await ids()).toEqual([1, 3, 4]);
  });

  it('answers anew when a column is flagged PII or unflagged, with the data unchanged (never a clear value kept)', async () => {
    const sqlEndpoint = { name: 'names', kind: 'sql', config: { query: 'select id, name from customers where id = $1', params: [{ name: 'id', type: 'integer', required: true }], cache_ttl_s: 300 } };
    const { secret } = await service('pii-flagged', lookup(300));
    const { secret: sqlSecret } = await service('pii-flagged-sql', sqlEndpoint);
    const flagName = async (pii: boolean) => {
      const res = await t.request('PATCH', `/api/datasets/${datasetId}`, { body: { columns: [{ name: 'name', pii }] } });
      expect(res.status, res.text).toBe(200);
    };
    const names = async () => [(await call('pii-flagged', 'customer', secret, 'id=1')).body.rows[0].name, (await call('pii-flagged-sql', 'names', sqlSecret, 'id=1')).body.rows[0].name];
    expect(await names()).toEqual(['Ada', 'Ada']);
    await flagName(true);
    // The endpoints list no `unmasked_columns`: the column just flagged is masked on the next call.
    expect(await names()).toEqual([PII_MASK, PII_MASK]);
    await flagName(false);
    expect(await names()).toEqual(['Ada', 'Ada']);
  });

  it('keeps keys and services in memory between calls, yet refuses a key the moment it expires and a service the moment it is unpublished', async () => {
    const { id, secret } = await service('expiring-keys', lookup(0));
    const minted = await t.request('POST', `${BASE}/${id}/keys`, { body: { name: 'short', expires_at: new Date(Date.now() + 1500).toISOString() } });
    expect(minted.status, minted.text).toBe(201);
    expect((await call('expiring-keys', 'customer', minted.body.key, 'id=1')).status).toBe(200);
    await sleep(1600);
    expect((await call('expiring-keys', 'customer', minted.body.key, 'id=1')).status).toBe(401);
    expect((await call('expiring-keys', 'customer', secret, 'id=1')).status).toBe(200);
    expect((await t.request('POST', `${BASE}/${id}/unpublish`)).status).toBe(200);
    expect((await call('expiring-keys', 'customer', secret, 'id=1')).status).toBe(404);
  });

  it('refuses a cache_ttl_s that is no whole number of seconds from 0 to 86400, naming it', async () => {
    for (const ttl of [-1, 86_401, 1.5, '60', null]) {
      const res = await t.request('POST', BASE, { body: { project_id: projectId, name: 'bad', key: 'bad-ttl', endpoints: [{ ...lookup(0), config: { ...lookup(0).config, cache_ttl_s: ttl } }] } });
      expect(res.status, res.text).toBe(400);
      expect(res.body.errors.map((e: { path: string }) => e.path)).toContain('body.endpoints.0.config.cache_ttl_s');
    }
  });
});
