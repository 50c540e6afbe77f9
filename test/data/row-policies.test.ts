import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

describe.each(DIALECTS)('row policies (%s)', (dialect) => {
  let t: TestKernel;
  let datasetId: number;
  let frTeam: number;
  let deTeam: number;
  const users: Record<string, string> = {};

  const rows = async (token: string) => (await t.request('GET', `/api/datasets/${datasetId}/rows?limit=100`, { token })).body.rows.map((r: { id: number }) => r.id);
  const sqlIds = async (token: string, sql = 'select id from sales order by id', params: unknown[] = []) => {
    const res = await t.request('POST', '/api/sql', { token, body: { sql, params } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.rows.map((r: unknown[]) => r[0]);
  };

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    const project = await t.request('POST', '/api/projects', { body: { key: 'RLS', name: 'Row level security' } });
    const dataset = await t.request('POST', '/api/datasets', {
      body: { name: 'sales', project_id: project.body.id, columns: [{ name: 'id', type: 'integer' }, { name: 'country', type: 'string' }, { name: 'amount', type: 'number' }] },
    });
    datasetId = dataset.body.id;
    const csv = "id,country,amount\n1,FR,10\n2,DE,20\n3,FR,30\n4,IT,40\n5,O'Neil,50\n";
    expect((await t.request('POST', `/api/datasets/${datasetId}/data`, { body: csv, headers: { 'content-type': 'text/csv' } })).status).toBe(200);
    frTeam = (await t.request('POST', '/api/groups', { body: { name: 'fr-team', capabilities: [] } })).body.id;
    deTeam = (await t.request('POST', '/api/groups', { body: { name: 'de-team', capabilities: [] } })).body.id;
    for (const [name, groups] of [['fr', [frTeam]], ['both', [frTeam, deTeam]], ['none', []]] as const) {
      const user = await t.userToken('editor', `rls-${name}`);
      for (const group of groups) expect((await t.request('POST', `/api/groups/${group}/members`, { body: { user_id: user.id } })).status).toBe(201);
      users[name] = user.token;
    }
  });
  afterAll(async () => t?.stop());

  it('shows every row while a dataset has no policy', async () => {
    expect(await rows(users.none)).toEqual([1, 2, 3, 4, 5]);
  });

  it('refuses malformed policies and policies for other organizations\u2019 groups', async () => {
    const create = (body: Record<string, unknown>, token?: string) => t.request('POST', `/api/datasets/${datasetId}/row-policies`, { body, token });
    expect((await create({ group_id: frTeam, filters: ['nope:eq:1'] })).body.errors[0].path).toBe('body.filters.0');
    expect((await create({ group_id: frTeam, filters: ['country:like:FR'] })).status).toBe(400);
    expect((await create({ group_id: frTeam, filters: ['amount:gt:lots'] })).status).toBe(400);
    expect((await create({ group_id: frTeam, filters: [] })).status).toBe(400);
    expect((await create({ group_id: 99_999, filters: ['country:eq:FR'] })).status).toBe(422);
    expect((await create({ group_id: frTeam, filters: ['country:eq:FR'] }, users.fr)).status).toBe(403);
    expect((await t.request('GET', `/api/datasets/${datasetId}/row-policies`)).body).toEqual([]);
  });

  it('limits every read path to the rows of the caller\u2019s groups', async () => {
    const fr = await t.request('POST', `/api/datasets/${datasetId}/row-policies`, { body: { group_id: frTeam, filters: ['country:eq:FR'], description: 'French sales' } });
    expect(fr.status).toBe(201);
    const de = await t.request('POST', `/api/datasets/${datasetId}/row-policies`, { body: { group_id: deTeam, filters: ['country:in:DE,O\'Neil', 'amount:gte:20'] } });
    expect(de.status).toBe(201);

    // rows
    expect(await rows(users.fr)).toEqual([1, 3]);
    expect(await rows(users.both)).toEqual([1, 2, 3, 5]);
    expect(await rows(users.none)).toEqual([]);
    expect(await rows(t.adminToken)).toEqual([1, 2, 3, 4, 5]); // platform admins bypass

    // export
    const csv = await t.request('GET', `/api/datasets/${datasetId}/export`, { token: users.fr });
    expect(csv.text.trim().split('\n')).toEqual(['id,country,amount', '1,FR,10', '3,FR,30']);

    // governed SQL, with the caller's own parameters still numbered from $1
    expect(await sqlIds(users.fr)).toEqual([1, 3]);
    expect(await sqlIds(users.both, 'select id from sales where amount > $1 order by id', [15])).toEqual([2, 3, 5]);
    expect(await sqlIds(users.none)).toEqual([]);
    expect(await sqlIds(users.fr, 'select count(*) from sales s1 join sales s2 on s1.id = s2.id')).toEqual([2]);

    // statistics
    const stats = await t.request('GET', `/api/statistics/datasets/${datasetId}`, { token: users.fr });
    expect(stats.body.row_count).toBe(2);
    expect(stats.body.columns.find((c: { name: string }) => c.name === 'country').top_values).toEqual([{ value: 'FR', count: 2 }]);
    expect((await t.request('GET', `/api/statistics/datasets/${datasetId}`, { token: users.both })).body.row_count).toBe(4);
    expect((await t.request('GET', `/api/statistics/datasets/${datasetId}`)).body.row_count).toBe(5);

    // data quality: the rule sees (and samples) only the caller's rows
    const rule = await t.request('POST', '/api/data-quality/rules', { body: { dataset_id: datasetId, name: 'amounts', type: 'range', params: { column: 'amount', max: 25 } } });
    const run = await t.request('POST', `/api/data-quality/rules/${rule.body.id}/run`, { token: users.fr });
    expect(run.body).toMatchObject({ status: 'failed', failing_rows: 1 });
    expect(run.body.sample.map((r: { id: number }) => r.id)).toEqual([3]);
  });

  it('keeps governed SQL inside the policy however a statement names the table or orders its conditions', async () => {
    // users.fr sees rows 1 and 3 (FR); DE, IT and O'Neil must never show.
    const hidden = /\bDE\b|\bIT\b|Neil/;
    const physical = dialect === 'postgres' ? `"org_1"."ds_${datasetId}"` : `org_1__ds_${datasetId}`;
    for (const sql of [
      `select id, country, amount from ${physical} -- sales`,
      `select id, country, amount from "org_1__ds_${datasetId}" /* sales */`,
      `select id, country, amount from [org_1__ds_${datasetId}] -- sales`,
      `with sales as (select * from org_1__ds_${datasetId}) select id, country, amount from sales`,
      `select s.id, r.country from sales s, org_1__ds_${datasetId} r`,
      `select id, country from sales union all select id, country from org_1__ds_${datasetId}`,
      `select 1) as q, (select group_concat(country) from org_1__ds_${datasetId}`,
      // A comment left open: SQLite reads it to the end of the text, past whatever follows the statement.
      `select id, country, amount from org_1__ds_${datasetId}) /* sales`,
      `select id, country, amount from "org_1__ds_${datasetId}" where country <> 'FR') /* sales`,
    ]) {
      const res = await t.request('POST', '/api/sql', { token: users.fr, body: { sql } });
      expect(res.status, `${sql}: ${res.text}`).toBe(400);
      expect(res.body.detail, sql).not.toMatch(hidden);
    }
    // A costlier policy: a database that merged the statement's conditions into the scan would
    // evaluate the cheap cast first, on every row, and its error would name a hidden country.
    const wider = await t.request('POST', `/api/datasets/${datasetId}/row-policies`, { body: { group_id: frTeam, filters: ['country:in:BE,LU,CH,ES,PT,NL,AT,PL'] } });
    expect(wider.status).toBe(201);
    const cast = dialect === 'postgres' ? "(case when country = 'FR' then null else country end)::bool" : "cast(case when country = 'FR' then null else country end as integer) > 0";
    const probe = await t.request('POST', '/api/sql', { token: users.fr, body: { sql: `select 1 from sales where ${cast}` } });
    expect(probe.text).not.toMatch(hidden);
    expect(probe.status, probe.text).toBe(200);
    expect(probe.body.rows).toEqual([]);
    expect(await sqlIds(users.fr)).toEqual([1, 3]);
    expect((await t.request('DELETE', `/api/datasets/${datasetId}/row-policies/${wider.body.id}`)).status).toBe(204);
  });

  it('shows everything again once the policies are removed', async () => {
    const policies = await t.request('GET', `/api/datasets/${datasetId}/row-policies`);
    expect(policies.body).toHaveLength(2);
    for (const policy of policies.body) expect((await t.request('DELETE', `/api/datasets/${datasetId}/row-policies/${policy.id}`)).status).toBe(204);
    expect(await rows(users.none)).toEqual([1, 2, 3, 4, 5]);
    expect((await t.request('DELETE', `/api/datasets/${datasetId}/row-policies/${policies.body[0].id}`)).status).toBe(404);
  });

  it('keeps policies inside their organization', async () => {
    const outsider = await t.outsider('rls-orgadmin');
    const orgId = String(outsider.orgId);
    const admins = await t.request('POST', '/api/groups', { body: { name: 'admins', capabilities: ['org.admin'] }, headers: { 'x-org-id': orgId } });
    expect((await t.request('POST', `/api/groups/${admins.body.id}/members`, { body: { user_id: outsider.userId }, headers: { 'x-org-id': orgId } })).status).toBe(201);
    const { token } = outsider;
    // An org admin of the other organization: org 1's dataset does not exist for them...
    expect((await t.request('GET', `/api/datasets/${datasetId}/row-policies`, { token })).status).toBe(404);
    expect((await t.request('POST', `/api/datasets/${datasetId}/row-policies`, { token, body: { group_id: admins.body.id, filters: ['country:eq:FR'] } })).status).toBe(404);
    // ...and naming org 1 is refused.
    expect((await t.request('GET', `/api/datasets/${datasetId}/row-policies`, { token, headers: { 'x-org-id': '1' } })).status).toBe(403);
    // A group of another organization cannot carry a policy of org 1.
    expect((await t.request('POST', `/api/datasets/${datasetId}/row-policies`, { body: { group_id: admins.body.id, filters: ['country:eq:FR'] } })).status).toBe(422);
  });
});

/** The compiled policies are cached per dataset version; no change may be served stale. */
describe.each(DIALECTS)('row policies, cached (%s)', (dialect) => {
  let t: TestKernel;
  let other: Awaited<ReturnType<TestKernel['peer']>>;
  let datasetId: number;
  let team: number;
  let member: { id: number; token: string };
  const csv = (rows: string) => ({ body: rows, headers: { 'content-type': 'text/csv' } });
  const idsOn = async (request: TestKernel['request'], token: string) => {
    const res = await request('GET', `/api/datasets/${datasetId}/rows?limit=100`, { token });
    expect(res.status, res.text).toBe(200);
    return res.body.rows.map((r: { id: number }) => r.id);
  };

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    other = await t.peer();
    const project = await t.request('POST', '/api/projects', { body: { key: 'RLC', name: 'Row policy cache' } });
    datasetId = (await t.request('POST', '/api/datasets', { body: { name: 'orders', project_id: project.body.id } })).body.id;
    expect((await t.request('POST', `/api/datasets/${datasetId}/data`, csv('id,region\n1,north\n2,south\n3,north\n'))).status).toBe(200);
    team = (await t.request('POST', '/api/groups', { body: { name: 'north-team', capabilities: [] } })).body.id;
    member = await t.userToken('editor', 'rlc-member');
    expect(await idsOn(other.request, member.token)).toEqual([1, 2, 3]);
  });
  afterAll(async () => t?.stop());

  it('a policy created through one instance applies on the other at its next read', async () => {
    const policy = await t.request('POST', `/api/datasets/${datasetId}/row-policies`, { body: { group_id: team, filters: ['region:eq:north'] } });
    expect(policy.status, policy.text).toBe(201);
    expect(await idsOn(other.request, member.token)).toEqual([]);
  });

  it('joining the policy\u2019s group opens its rows at the next read', async () => {
    expect((await t.request('POST', `/api/groups/${team}/members`, { body: { user_id: member.id } })).status).toBe(201);
    expect(await idsOn(other.request, member.token)).toEqual([1, 3]);
    expect(await idsOn(t.request, member.token)).toEqual([1, 3]);
  });

  it('new data under a new schema recompiles the policies: a lost column closes every row, its return reopens them', async () => {
    expect((await t.request('POST', `/api/datasets/${datasetId}/data?mode=replace`, csv('id,area\n1,north\n2,south\n'))).status).toBe(200);
    expect(await idsOn(other.request, member.token)).toEqual([]);
    expect((await t.request('POST', `/api/datasets/${datasetId}/data?mode=replace`, csv('id,region\n4,north\n5,south\n6,north\n'))).status).toBe(200);
    expect(await idsOn(other.request, member.token)).toEqual([4, 6]);
  });

  it('a policy removed through one instance is lifted on the other at its next read', async () => {
    const [policy] = (await t.request('GET', `/api/datasets/${datasetId}/row-policies`)).body;
    expect((await t.request('DELETE', `/api/datasets/${datasetId}/row-policies/${policy.id}`)).status).toBe(204);
    expect(await idsOn(other.request, member.token)).toEqual([4, 5, 6]);
  });
});
