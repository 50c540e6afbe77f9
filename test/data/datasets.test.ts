import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type DialectName, type TestKernel, type TestResponse } from '../harness/index.ts';

type Row = Record<string, unknown>;
type Mode = 'append' | 'replace';

const ALL_TYPES = [
  { name: 's', type: 'string' },
  { name: 'i', type: 'integer' },
  { name: 'n', type: 'number' },
  { name: 'b', type: 'boolean' },
  { name: 'd', type: 'date' },
  { name: 'ts', type: 'timestamp' },
  { name: 'j', type: 'json' },
] as const;

/** Helpers bound to one kernel: everything goes through HTTP except the physical-table checks. */
function helpers(t: TestKernel, dialect: DialectName) {
  let counter = 0;
  const unique = (prefix: string) => `${prefix}_${++counter}`;

  const createDataset = async (projectId: number, columns: unknown[] = [], opts: { name?: string; token?: string } = {}) => {
    const res = await t.request('POST', '/api/datasets', { token: opts.token, body: { name: opts.name ?? unique('ds'), project_id: projectId, columns } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body as { id: number; name: string; columns: { name: string; type: string; pii: boolean }[]; row_count: number; version: number; org_id: number };
  };

  const upload = (id: number, text: string, mode?: Mode, opts: { token?: string | null; headers?: Record<string, string> } = {}) =>
    t.request('POST', `/api/datasets/${id}/data${mode ? `?mode=${mode}` : ''}`, { token: opts.token, body: text, headers: { 'content-type': 'text/csv', ...opts.headers } });

  const appendJson = (id: number, rows: unknown, token?: string) => t.request('POST', `/api/datasets/${id}/rows`, { token, body: rows });

  const rows = async (id: number, query = '', token?: string): Promise<TestResponse> => t.request('GET', `/api/datasets/${id}/rows${query ? `?${query}` : ''}`, { token });

  /** Every row, in storage order (no sort), for exact before/after comparisons. */
  const allRows = async (id: number, token?: string): Promise<Row[]> => {
    const res = await rows(id, 'limit=1000', token);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.next_cursor).toBeNull();
    return res.body.rows;
  };

  const snapshot = async (id: number) => {
    const dataset = (await t.request('GET', `/api/datasets/${id}`)).body;
    return { row_count: dataset.row_count, version: dataset.version, columns: dataset.columns, updated_at: dataset.updated_at, rows: await allRows(id) };
  };

  /** Names of the physical tables in an organization's namespace (schema on Postgres, prefix on SQLite). */
  const physicalTables = async (orgId: number): Promise<string[]> => {
    const db = t.kernel.storage.db;
    if (dialect === 'postgres') {
      const result = await sql<{ name: string }>`select table_name as name from information_schema.tables where table_schema = ${`org_${orgId}`}`.execute(db);
      return result.rows.map((r) => r.name).sort();
    }
    const result = await sql<{ name: string }>`select name from sqlite_master where type = 'table'`.execute(db);
    return result.rows
      .map((r) => r.name)
      .filter((name) => name.startsWith(`org_${orgId}__`))
      .map((name) => name.slice(`org_${orgId}__`.length))
      .sort();
  };

  const tableName = async (id: number): Promise<string> =>
    (await t.kernel.storage.db.selectFrom('datasets').select('table_name').where('id', '=', id).executeTakeFirstOrThrow()).table_name as string;

  return { unique, createDataset, upload, appendJson, rows, allRows, snapshot, physicalTables, tableName };
}

describe.each(DIALECTS)('datasets (%s)', (dialect) => {
  let t: TestKernel;
  let h: ReturnType<typeof helpers>;
  let projectId: number;
  let viewer: string;
  let otherOrgId: number;
  let otherToken: string;
  let otherUserId: number;
  let otherProjectId: number;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    h = helpers(t, dialect);
    const project = await t.request('POST', '/api/projects', { body: { key: 'DATA', name: 'Data' } });
    expect(project.status).toBe(201);
    projectId = project.body.id;
    viewer = (await t.userToken('viewer')).token;
    const org = await t.request('POST', '/api/organizations', { body: { name: 'Other org' } });
    expect(org.status).toBe(201);
    otherOrgId = org.body.id;
    const user = await t.request('POST', '/api/users', { body: { username: 'other-editor', email: 'other-editor@example.test', role: 'editor', password: 'Sunny-meadow-42', default_org_id: otherOrgId } });
    expect(user.status).toBe(201);
    otherUserId = user.body.id;
    otherToken = await t.kernel.issueToken({ id: user.body.id, role: 'editor' });
    const theirs = await t.request('POST', '/api/projects', { token: otherToken, body: { key: 'THEIRS', name: 'Theirs' } });
    expect(theirs.status).toBe(201);
    otherProjectId = theirs.body.id;
  });
  afterAll(async () => t?.stop());

  describe('catalog', () => {
    it('creates a dataset with declared columns of all seven types', async () => {
      const columns = ALL_TYPES.map((c) => (c.name === 's' ? { ...c, pii: true } : c));
      const res = await t.request('POST', '/api/datasets', { body: { name: 'AllTypes', project_id: projectId, description: 'every type', columns } });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ name: 'AllTypes', project_id: projectId, org_id: 1, description: 'every type', row_count: 0, version: 1 });
      expect(res.body.columns).toEqual(ALL_TYPES.map((c) => ({ name: c.name, type: c.type, pii: c.name === 's', description: null })));
      expect(res.body).not.toHaveProperty('table_name');
      const got = await t.request('GET', `/api/datasets/${res.body.id}`);
      expect(got.status).toBe(200);
      expect(got.body).toEqual(res.body);
      expect(await h.physicalTables(1)).toContain(await h.tableName(res.body.id));
    });

    it('refuses names that are not identifiers, naming body.name', async () => {
      for (const name of ['1abc', 'a-b', '', 'with space', 'x'.repeat(64)]) {
        const res = await t.request('POST', '/api/datasets', { body: { name, project_id: projectId } });
        expect(res.status, name).toBe(400);
        expect(res.body.errors.map((e: { path: string }) => e.path), name).toContain('body.name');
      }
      expect((await t.request('POST', '/api/datasets', { body: { name: 'a_B9', project_id: projectId } })).status).toBe(201);
    });

    it('refuses a duplicate name in the organization with 409 and leaves one dataset', async () => {
      const first = await h.createDataset(projectId, [], { name: 'dup_name' });
      const again = await t.request('POST', '/api/datasets', { body: { name: 'dup_name', project_id: projectId, columns: [{ name: 'x', type: 'string' }] } });
      expect(again.status).toBe(409);
      const listed = await t.request('GET', '/api/datasets?search=dup_name');
      expect(listed.body.items.map((d: { id: number }) => d.id)).toEqual([first.id]);
    });

    it('refuses an unknown project or another organization\u2019s project with 422', async () => {
      for (const project_id of [999_999, otherProjectId]) {
        const res = await t.request('POST', '/api/datasets', { body: { name: h.unique('orphan'), project_id } });
        expect(res.status, String(project_id)).toBe(422);
        expect(res.body.errors[0].path).toBe('body.project_id');
      }
    });

    it('refuses duplicate column names (case-insensitively) and bad column types with 400', async () => {
      const dup = await t.request('POST', '/api/datasets', { body: { name: h.unique('dupcol'), project_id: projectId, columns: [{ name: 'a', type: 'string' }, { name: 'A', type: 'integer' }] } });
      expect(dup.status).toBe(400);
      expect(dup.body.errors[0].path).toBe('body.columns.1.name');
      const badType = await t.request('POST', '/api/datasets', { body: { name: h.unique('badtype'), project_id: projectId, columns: [{ name: 'a', type: 'varchar' }] } });
      expect(badType.status).toBe(400);
      expect(badType.body.errors[0].path).toBe('body.columns.0.type');
      const reserved = await t.request('POST', '/api/datasets', { body: { name: h.unique('reserved'), project_id: projectId, columns: [{ name: '_row_id', type: 'integer' }] } });
      expect(reserved.status).toBe(400);
    });

    it('lists with paging, search on name and description, and project_id', async () => {
      const project = (await t.request('POST', '/api/projects', { body: { key: 'LISTING', name: 'Listing' } })).body;
      const made = [];
      for (const [name, description] of [['sales_2024', null], ['Sales_Archive', 'old numbers'], ['inventory', 'stock of SALES items'], ['pct_100', 'growth 100%']]) {
        const res = await t.request('POST', '/api/datasets', { body: { name, description, project_id: project.id } });
        expect(res.status).toBe(201);
        made.push(res.body);
      }
      const byProject = await t.request('GET', `/api/datasets?project_id=${project.id}`);
      expect(byProject.status).toBe(200);
      expect(byProject.body.total).toBe(4);
      expect(byProject.body.items.map((d: { id: number }) => d.id)).toEqual(made.map((d) => d.id));
      const search = await t.request('GET', `/api/datasets?project_id=${project.id}&search=SALES`);
      expect(search.body.items.map((d: { name: string }) => d.name)).toEqual(['sales_2024', 'Sales_Archive', 'inventory']);
      expect((await t.request('GET', `/api/datasets?project_id=${project.id}&search=100%25`)).body.items.map((d: { name: string }) => d.name)).toEqual(['pct_100']);
      expect((await t.request('GET', `/api/datasets?project_id=${project.id}&search=s_2`)).body.items.map((d: { name: string }) => d.name)).toEqual(['sales_2024']);
      const page = await t.request('GET', `/api/datasets?project_id=${project.id}&limit=2&offset=1`);
      expect(page.body).toMatchObject({ total: 4, limit: 2, offset: 1 });
      expect(page.body.items.map((d: { id: number }) => d.id)).toEqual([made[1].id, made[2].id]);
      const all = await t.request('GET', '/api/datasets?limit=500');
      expect(all.body.total).toBeGreaterThanOrEqual(made.length);
      expect(all.body.items.every((d: { org_id: number }) => d.org_id === 1)).toBe(true);
      expect((await t.request('GET', '/api/datasets?limit=0')).status).toBe(400);
      expect((await t.request('GET', '/api/datasets?limit=501')).status).toBe(400);
    });

    it('renames, changes descriptions and PII flags, refusing unknown columns and taken names', async () => {
      const ds = await h.createDataset(projectId, [{ name: 'email', type: 'string' }, { name: 'age', type: 'integer' }]);
      const other = await h.createDataset(projectId);
      const patched = await t.request('PATCH', `/api/datasets/${ds.id}`, {
        body: { name: 'customers', description: 'people', columns: [{ name: 'email', pii: true, description: 'contact' }] },
      });
      expect(patched.status).toBe(200);
      expect(patched.body).toMatchObject({ id: ds.id, name: 'customers', description: 'people', version: 1 });
      expect(patched.body.columns).toEqual([
        { name: 'email', type: 'string', pii: true, description: 'contact' },
        { name: 'age', type: 'integer', pii: false, description: null },
      ]);
      expect((await t.request('GET', `/api/datasets/${ds.id}`)).body.columns[0].pii).toBe(true);
      const unflag = await t.request('PATCH', `/api/datasets/${ds.id}`, { body: { columns: [{ name: 'email', pii: false }] } });
      expect(unflag.body.columns[0]).toEqual({ name: 'email', type: 'string', pii: false, description: 'contact' });

      const unknown = await t.request('PATCH', `/api/datasets/${ds.id}`, { body: { columns: [{ name: 'age', pii: true }, { name: 'nope', pii: true }] } });
      expect(unknown.status).toBe(400);
      expect(unknown.body.errors[0].path).toBe('body.columns.1.name');
      expect((await t.request('GET', `/api/datasets/${ds.id}`)).body.columns[1].pii).toBe(false);

      const badName = await t.request('PATCH', `/api/datasets/${ds.id}`, { body: { name: 'bad-name' } });
      expect(badName.status).toBe(400);
      expect(badName.body.errors[0].path).toBe('body.name');
      expect((await t.request('PATCH', `/api/datasets/${ds.id}`, { body: { name: other.name } })).status).toBe(409);
      expect((await t.request('PATCH', `/api/datasets/${ds.id}`, { body: {} })).status).toBe(400);
      expect((await t.request('GET', `/api/datasets/${ds.id}`)).body.name).toBe('customers');
      expect((await t.request('PATCH', '/api/datasets/999999', { body: { name: 'x' } })).status).toBe(404);
    });

    it('deletes a dataset: 404 afterwards and its physical table is gone', async () => {
      const ds = await h.createDataset(projectId, [{ name: 'v', type: 'integer' }]);
      expect((await h.appendJson(ds.id, [{ v: 1 }, { v: 2 }])).status).toBe(200);
      const table = await h.tableName(ds.id);
      const ref = t.kernel.storage.dataTables.ref(1, table);
      const before = await sql<{ c: number }>`select count(*) as c from ${ref}`.execute(t.kernel.storage.db);
      expect(Number(before.rows[0].c)).toBe(2);
      expect(await h.physicalTables(1)).toContain(table);

      expect((await t.request('DELETE', `/api/datasets/${ds.id}`)).status).toBe(204);
      expect((await t.request('GET', `/api/datasets/${ds.id}`)).status).toBe(404);
      expect((await h.rows(ds.id)).status).toBe(404);
      expect((await t.request('DELETE', `/api/datasets/${ds.id}`)).status).toBe(404);
      await expect(sql`select count(*) as c from ${ref}`.execute(t.kernel.storage.db)).rejects.toThrow();
      expect(await h.physicalTables(1)).not.toContain(table);
      // The name is free again.
      expect((await t.request('POST', '/api/datasets', { body: { name: ds.name, project_id: projectId } })).status).toBe(201);
    });
  });

  describe('at once', () => {
    it('creates and loads six datasets at once in a new organization, every one of them', async () => {
      for (let round = 0; round < 3; round += 1) {
        // A new organization: its namespace (a schema on Postgres) does not exist yet.
        const { token } = await t.outsider(`concurrent-${round}`);
        const project = await t.request('POST', '/api/projects', { token, body: { key: `AT${round}`, name: 'At once' } });
        const answers = await Promise.all(
          Array.from({ length: 6 }, async (_, i) => {
            const created = await t.request('POST', '/api/datasets', { token, body: { name: `together_${i}`, project_id: project.body.id } });
            if (created.status !== 201) return `create ${i}: ${created.status} ${created.text}`;
            const loaded = await h.upload(created.body.id, `k,v\n${i},x\n`, undefined, { token });
            return loaded.status === 200 ? 'ok' : `load ${i}: ${loaded.status} ${loaded.text}`;
          }),
        );
        expect(answers, `round ${round}`).toEqual(Array(6).fill('ok'));
      }
    });
  });

  describe('CSV upload', () => {
    const INFER_CSV = [
      'i,n,b,d,ts,s,bits,empty,mixed',
      '1,1.5,true,2024-01-31,2024-01-31T10:00:00Z,hello,1,,1',
      '-2,2,false,2024-02-29,2024-02-01 08:30:00+02:00,"world, quoted",0,,x',
      ',3e2,yes,,2024-03-01T00:00:00.123Z,,1,,2',
    ].join('\n');

    it('infers types on an empty dataset and reads back typed values', async () => {
      const ds = await h.createDataset(projectId);
      expect(ds.columns).toEqual([]);
      const res = await h.upload(ds.id, `${INFER_CSV}\n`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.rows_loaded).toBe(3);
      expect(res.body.dataset).toMatchObject({ id: ds.id, row_count: 3, version: 2 });
      const types = Object.fromEntries(res.body.dataset.columns.map((c: { name: string; type: string }) => [c.name, c.type]));
      expect(types).toEqual({ i: 'integer', n: 'number', b: 'boolean', d: 'date', ts: 'timestamp', s: 'string', bits: 'integer', empty: 'string', mixed: 'string' });
      expect(res.body.dataset.columns.every((c: { pii: boolean }) => c.pii === false)).toBe(true);

      const page = await h.rows(ds.id);
      expect(page.status).toBe(200);
      expect(page.body.columns.map(({ name, type }: { name: string; type: string }) => ({ name, type }))).toEqual(Object.entries(types).map(([name, type]) => ({ name, type })));
      expect(page.body.rows).toEqual([
        { i: 1, n: 1.5, b: true, d: '2024-01-31', ts: '2024-01-31T10:00:00.000Z', s: 'hello', bits: 1, empty: null, mixed: '1' },
        { i: -2, n: 2, b: false, d: '2024-02-29', ts: '2024-02-01T06:30:00.000Z', s: 'world, quoted', bits: 0, empty: null, mixed: 'x' },
        { i: null, n: 300, b: true, d: null, ts: '2024-03-01T00:00:00.123Z', s: null, bits: 1, empty: null, mixed: '2' },
      ]);
      expect(page.body.next_cursor).toBeNull();
      const got = (await t.request('GET', `/api/datasets/${ds.id}`)).body;
      expect(got).toMatchObject({ row_count: 3, version: 2 });
    });

    it('accepts CRLF line ends, a BOM and a file without a trailing newline', async () => {
      const ds = await h.createDataset(projectId);
      const res = await h.upload(ds.id, '\uFEFFa,b\r\n1,x\r\n2,y');
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.dataset.columns.map((c: { name: string }) => c.name)).toEqual(['a', 'b']);
      expect(await h.allRows(ds.id)).toEqual([{ a: 1, b: 'x' }, { a: 2, b: 'y' }]);
    });

    it('loads every declared type from CSV, including JSON', async () => {
      const ds = await h.createDataset(projectId, [...ALL_TYPES]);
      const csv = 's,i,n,b,d,ts,j\nabc,42,-0.25,no,2023-12-31,2023-12-31T23:59:59+01:00,"{""k"":[1,2]}"\n,,,,,,\n';
      const res = await h.upload(ds.id, csv);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(await h.allRows(ds.id)).toEqual([
        { s: 'abc', i: 42, n: -0.25, b: false, d: '2023-12-31', ts: '2023-12-31T22:59:59.000Z', j: { k: [1, 2] } },
        { s: null, i: null, n: null, b: null, d: null, ts: null, j: null },
      ]);
    });

    it('refuses U+0000 in JSON values and in an inferred column as it does in text, leaving the dataset as it was', async () => {
      const ds = await h.createDataset(projectId, [{ name: 'j', type: 'json' }]);
      expect((await h.upload(ds.id, 'j\n"{""a"":""\\\\u0000 is text""}"\n')).status).toBe(200); // an escaped backslash, not a NUL
      const before = await h.snapshot(ds.id);
      for (const json of ['"{""a"":""x\\u0000""}"', '"{""k\\u0000"":1}"', '"[[""\\u0000""]]"']) {
        const res = await h.upload(ds.id, `j\n{}\n${json}\n`);
        expect(res.status, json).toBe(422);
        expect(res.body.detail).toMatch(/line 3\b.*"j".*NUL/);
      }
      expect(await h.snapshot(ds.id)).toEqual(before);
      const empty = await h.createDataset(projectId);
      const inferred = await h.upload(empty.id, 'n,t\n1,a\n2,b\u0000\n');
      expect(inferred.status).toBe(422);
      expect(inferred.body.detail).toMatch(/line 3\b.*"t".*NUL/);
      expect((await t.request('GET', `/api/datasets/${empty.id}`)).body).toMatchObject({ row_count: 0, version: 1, columns: [] });
    });

    it('keeps quoted line breaks and commas, and takes a quote inside an unquoted field as text', async () => {
      const ds = await h.createDataset(projectId, [{ name: 's', type: 'string' }, { name: 'i', type: 'integer' }]);
      const res = await h.upload(ds.id, 's,i\r\n"two\r\nlines, one comma",1\r\nhe said "hi",2\r\n"""quoted""",3\r\n');
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(await h.allRows(ds.id)).toEqual([
        { s: 'two\r\nlines, one comma', i: 1 },
        { s: 'he said "hi"', i: 2 },
        { s: '"quoted"', i: 3 },
      ]);
    });

    it('loads a file of 1000 columns whole, and refuses one of 1001 with a 422', async () => {
      const ds = await h.createDataset(projectId);
      const header = (width: number) => Array.from({ length: width }, (_, c) => `c${c}`).join(',');
      // Values at both ends only: a row must fit a Postgres page.
      const lines = Array.from({ length: 45 }, (_, r) => `${r}${','.repeat(999)}${r * 7 + 1}`);
      const res = await h.upload(ds.id, `${header(1000)}\n${lines.join('\n')}\n`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.rows_loaded).toBe(45);
      const rows = await h.allRows(ds.id);
      expect(rows.map((row) => [row.c0, row.c1, row.c999])).toEqual(Array.from({ length: 45 }, (_, r) => [r, null, r * 7 + 1]));
      const wider = await h.upload(ds.id, `${header(1001)}\n${'1,'.repeat(1000)}1\n`);
      expect(wider.status).toBe(422);
      expect(wider.body.detail).toMatch(/1001 columns.*at most 1000/);
      expect((await t.request('GET', `/api/datasets/${ds.id}`)).body.row_count).toBe(45);
    });

    it('checks dates and timestamps against the calendar and stores timestamps as UTC with milliseconds', async () => {
      const ds = await h.createDataset(projectId, [{ name: 'd', type: 'date' }, { name: 'ts', type: 'timestamp' }]);
      const ok = await h.upload(ds.id, 'd,ts\n2024-02-29,2024-02-29T23:59:59Z\n2000-02-29,2000-02-29T00:00:00.250Z\n1999-12-31,1999-12-31T10:00:00.5Z\n');
      expect(ok.status, JSON.stringify(ok.body)).toBe(200);
      expect(await h.allRows(ds.id)).toEqual([
        { d: '2024-02-29', ts: '2024-02-29T23:59:59.000Z' },
        { d: '2000-02-29', ts: '2000-02-29T00:00:00.250Z' },
        { d: '1999-12-31', ts: '1999-12-31T10:00:00.500Z' },
      ]);
      for (const [line, expected] of [
        ['2023-02-29,', /"d"/],
        ['1900-02-29,', /"d"/],
        ['2024-04-31,', /"d"/],
        ['0000-01-01,', /"d"/],
        [',2023-02-29T10:00:00Z', /"ts"/],
        [',2024-01-01T10:60:00Z', /"ts"/],
        [',2024-13-01T10:00:00Z', /"ts"/],
      ] as const) {
        const refused = await h.upload(ds.id, `d,ts\n${line}\n`, 'append');
        expect(refused.status, line).toBe(422);
        expect(refused.body.detail).toMatch(expected);
      }
    });

    it('appends by header name: a subset leaves the rest null, another order maps by name', async () => {
      const ds = await h.createDataset(projectId, [{ name: 's', type: 'string' }, { name: 'i', type: 'integer' }, { name: 'n', type: 'number' }]);
      const first = await h.upload(ds.id, 's,i,n\na,1,1.5\n', 'append');
      expect(first.status).toBe(200);
      expect(first.body.dataset).toMatchObject({ row_count: 1, version: 2 });
      const subset = await h.upload(ds.id, 'i\n2\n3\n');
      expect(subset.status, JSON.stringify(subset.body)).toBe(200);
      expect(subset.body.rows_loaded).toBe(2);
      expect(subset.body.dataset).toMatchObject({ row_count: 3, version: 3 });
      const reordered = await h.upload(ds.id, 'n,s,i\n9.5,z,4\n', 'append');
      expect(reordered.status).toBe(200);
      expect(reordered.body.dataset).toMatchObject({ row_count: 4, version: 4 });
      expect(await h.allRows(ds.id)).toEqual([
        { s: 'a', i: 1, n: 1.5 },
        { s: null, i: 2, n: null },
        { s: null, i: 3, n: null },
        { s: 'z', i: 4, n: 9.5 },
      ]);
      // Declared columns keep their types: the upload does not re-infer them.
      expect((await t.request('GET', `/api/datasets/${ds.id}`)).body.columns.map((c: { type: string }) => c.type)).toEqual(['string', 'integer', 'number']);
    });

    it('keeps a PII flag set while a replace upload was streaming', async () => {
      const ds = await h.createDataset(projectId, [{ name: 'email', type: 'string' }, { name: 'n', type: 'integer' }]);
      const url = new URL(`/api/datasets/${ds.id}/data?mode=replace`, t.url);
      const answered = new Promise<{ status: number; body: string }>((resolve, reject) => {
        const request = http.request(url, { method: 'POST', headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'text/csv' } }, (res) => {
          let body = '';
          res.on('data', (chunk) => (body += chunk));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        request.on('error', reject);
        request.write('email,n\na@example.test,1\n');
        // The upload is under way (its dataset read) when the flag changes; then the file ends.
        setTimeout(async () => {
          const flagged = await t.request('PATCH', `/api/datasets/${ds.id}`, { body: { columns: [{ name: 'email', pii: true, description: 'contact' }] } });
          expect(flagged.status).toBe(200);
          request.end('b@example.test,2\n');
        }, 300);
      });
      const { status, body } = await answered;
      expect(status, body).toBe(200);
      const after = (await t.request('GET', `/api/datasets/${ds.id}`)).body;
      expect(after.row_count).toBe(2);
      expect(after.columns).toEqual([
        { name: 'email', type: 'string', pii: true, description: 'contact' },
        { name: 'n', type: 'integer', pii: false, description: null },
      ]);
    });

    it('replaces the data and the row count', async () => {
      const ds = await h.createDataset(projectId, [{ name: 's', type: 'string' }, { name: 'i', type: 'integer' }]);
      expect((await h.upload(ds.id, 's,i\na,1\nb,2\nc,3\n')).body.dataset.row_count).toBe(3);
      const replaced = await h.upload(ds.id, 'i,s\n10,x\n20,y\n', 'replace');
      expect(replaced.status, JSON.stringify(replaced.body)).toBe(200);
      expect(replaced.body).toMatchObject({ rows_loaded: 2, dataset: { row_count: 2, version: 3 } });
      expect(await h.allRows(ds.id)).toEqual([{ s: 'x', i: 10 }, { s: 'y', i: 20 }]);
      const emptied = await h.upload(ds.id, 's,i\n', 'replace');
      expect(emptied.status).toBe(200);
      expect(emptied.body.dataset).toMatchObject({ row_count: 0, version: 4 });
      expect(await h.allRows(ds.id)).toEqual([]);
      // Only the dataset's own table is left: no staging tables, no old copy.
      const table = await h.tableName(ds.id);
      expect((await h.physicalTables(1)).filter((name) => name.startsWith(`${table}_`))).toEqual([]);
    });

    it('refuses, on append, a header naming an unknown column with 422 naming it', async () => {
      const ds = await h.createDataset(projectId, [{ name: 's', type: 'string' }]);
      expect((await h.upload(ds.id, 's\nkept\n')).status).toBe(200);
      const before = await h.snapshot(ds.id);
      const res = await h.upload(ds.id, 's,mystery\na,b\n', 'append');
      expect(res.status).toBe(422);
      expect(res.body.detail).toContain('"mystery"');
      expect(res.body.detail).toMatch(/line 1\b/);
      expect(await h.snapshot(ds.id)).toEqual(before);
    });

    it('takes, on replace, the header as the new schema: known columns keep type and flags, new ones are inferred', async () => {
      const ds = await h.createDataset(projectId, [{ name: 'code', type: 'string', pii: true, description: 'the code' }, { name: 'qty', type: 'integer' }, { name: 'gone', type: 'date' }]);
      expect((await h.upload(ds.id, 'code,qty,gone\n007,1,2024-01-01\n')).status).toBe(200);
      const res = await h.upload(ds.id, 'qty,code,added\n5,42,1.5\n6,43,2\n', 'replace');
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.dataset).toMatchObject({ row_count: 2, version: 3 });
      expect(res.body.dataset.columns).toEqual([
        { name: 'qty', type: 'integer', pii: false, description: null },
        { name: 'code', type: 'string', pii: true, description: 'the code' },
        { name: 'added', type: 'number', pii: false, description: null },
      ]);
      expect(await h.allRows(ds.id)).toEqual([{ qty: 5, code: '42', added: 1.5 }, { qty: 6, code: '43', added: 2 }]);
      // A known column keeps its declared type: a value that does not fit it is refused.
      const bad = await h.upload(ds.id, 'qty,code\n7,x\nseven,y\n', 'replace');
      expect(bad.status).toBe(422);
      expect(bad.body.detail).toMatch(/line 3\b.*"qty"/);
      expect((await t.request('GET', `/api/datasets/${ds.id}`)).body).toMatchObject({ row_count: 2, version: 3, columns: res.body.dataset.columns });
    });

    describe.each(['append', 'replace'] as const)('bad input in %s mode leaves the dataset exactly as it was', (mode) => {
      let ds: { id: number };
      let before: Awaited<ReturnType<ReturnType<typeof helpers>['snapshot']>>;
      let tablesBefore: string[];

      beforeAll(async () => {
        ds = await h.createDataset(projectId, [{ name: 's', type: 'string' }, { name: 'i', type: 'integer' }]);
        expect((await h.upload(ds.id, 's,i\nkeep,1\nme,2\n')).status).toBe(200);
        before = await h.snapshot(ds.id);
        expect(before).toMatchObject({ row_count: 2, version: 2, rows: [{ s: 'keep', i: 1 }, { s: 'me', i: 2 }] });
        tablesBefore = await h.physicalTables(1);
      });

      const expectUnchanged = async () => {
        expect(await h.snapshot(ds.id)).toEqual(before);
        expect(await h.physicalTables(1)).toEqual(tablesBefore);
      };

      it('a ragged row: 400 naming the line', async () => {
        const res = await h.upload(ds.id, 's,i\na,1\nb,2,3\nc,4\n', mode);
        expect(res.status).toBe(400);
        expect(res.body.detail).toMatch(/line 3\b/);
        const short = await h.upload(ds.id, 's,i\na,1\nb,2\nc\n', mode);
        expect(short.status).toBe(400);
        expect(short.body.detail).toMatch(/line 4\b/);
        await expectUnchanged();
      });

      it('bad quoting: 400', async () => {
        const unclosed = await h.upload(ds.id, 's,i\na,1\n"b,2\nc,3\n', mode);
        expect(unclosed.status).toBe(400);
        expect(unclosed.body.detail).toMatch(/quote/i);
        const stray = await h.upload(ds.id, 's,i\na,1\n"b"x,2\n', mode);
        expect(stray.status).toBe(400);
        expect(stray.body.detail).toMatch(/line 3\b/);
        await expectUnchanged();
      });

      it('undecodable bytes: 400 naming the line', async () => {
        const body = Buffer.concat([Buffer.from('s,i\na,1\nb,2\nc'), Buffer.from([0xff, 0xfe]), Buffer.from(',3\nd,4\n')]);
        const response = await fetch(`${t.url}/api/datasets/${ds.id}/data?mode=${mode}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'text/csv' },
          body: new Uint8Array(body),
        });
        expect(response.status).toBe(400);
        const problem = await response.json();
        expect(problem.detail).toMatch(/UTF-8/);
        expect(problem.detail).toMatch(/line 4\b/);
        // Deep inside a large upload that reaches the server in many chunks.
        const lines = ['s,i', ...Array.from({ length: 20_000 }, (_, k) => `row-${k},${k}`)].join('\n');
        const cut = lines.indexOf('\nrow-15000,') + 1; // line 15002
        const large = Buffer.concat([Buffer.from(lines.slice(0, cut)), Buffer.from('r\u00e9'), Buffer.from([0xc3, 0x28]), Buffer.from(lines.slice(cut))]);
        const deep = await fetch(`${t.url}/api/datasets/${ds.id}/data?mode=${mode}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'text/csv' },
          body: new Uint8Array(large),
        });
        expect(deep.status).toBe(400);
        expect((await deep.json()).detail).toMatch(/UTF-8.*line 15002\b/);
        await expectUnchanged();
      });

      it('a value that does not fit its declared type: 422 naming the line and column', async () => {
        const res = await h.upload(ds.id, 's,i\na,1\nb,2\nc,x\n', mode);
        expect(res.status).toBe(422);
        expect(res.body.detail).toMatch(/line 4\b/);
        expect(res.body.detail).toContain('"i"');
        // Past the first batches too: everything staged so far is thrown away.
        const lines = ['s,i', ...Array.from({ length: 2500 }, (_, k) => `r${k},${k}`), 'bad,1.5', 'after,1'];
        const late = await h.upload(ds.id, `${lines.join('\n')}\n`, mode);
        expect(late.status).toBe(422);
        expect(late.body.detail).toMatch(/line 2502\b/);
        expect(late.body.detail).toContain('"i"');
        // Lines are lines of the file: quoted line breaks and empty lines count.
        const spanning = await h.upload(ds.id, 's,i\n"multi\nline",1\n\nb,2\nc,x\n', mode);
        expect(spanning.status).toBe(422);
        expect(spanning.body.detail).toMatch(/line 6\b/);
        await expectUnchanged();
      });

      it('a 25 MB field, or a quote never closed in a 25 MB file, at the default CSV_MAX_FIELD_BYTES: 422 naming the line', async () => {
        const field = await h.upload(ds.id, `s,i\na,1\n"multi\nline",2\nb,3\n${'x'.repeat(25 * 1024 * 1024)},4\n`, mode);
        expect(field.status).toBe(422);
        expect(field.body.detail).toMatch(/^line 6, field 1: longer than the limit of 1048576 bytes \(CSV_MAX_FIELD_BYTES\)/);
        const rows = Array.from({ length: 1_500_000 }, (_, k) => `row ${k},${k}`).join('\n');
        const unclosed = await h.upload(ds.id, `s,i\na,1\n"never closed,2\n${rows}\n`, mode);
        expect(unclosed.status).toBe(422);
        expect(unclosed.body.detail).toMatch(/^line 3, field 1: longer than the limit of 1048576 bytes/);
        await expectUnchanged();
      });

      it('a header or sample problem at the head of a large upload: the rest is still read, so the connection serves the next request', async () => {
        // As a client that writes the whole body before it reads (many do), then asks again on the
        // same keep-alive connection: a server that stopped reading the body never gets to that request.
        const post = async (csv: string) => {
          const url = new URL(t.url);
          const socket = net.connect(Number(url.port), url.hostname);
          await once(socket, 'connect');
          const body = Buffer.from(csv);
          const headers = `Host: ${url.host}\r\nAuthorization: Bearer ${t.adminToken}\r\n`;
          const upload = `POST /api/datasets/${ds.id}/data?mode=${mode} HTTP/1.1\r\n${headers}Content-Type: text/csv\r\nContent-Length: ${body.length}\r\n\r\n`;
          const answers: { status: number; body: any }[] = [];
          let received = Buffer.alloc(0);
          const done = new Promise<void>((resolve) => {
            socket.on('close', () => resolve());
            socket.on('data', (chunk: Buffer) => {
              received = Buffer.concat([received, chunk]);
              for (let end = received.indexOf('\r\n\r\n'); end !== -1; end = received.indexOf('\r\n\r\n')) {
                const head = received.subarray(0, end).toString();
                const length = Number(/content-length: (\d+)/i.exec(head)?.[1]);
                if (received.length < end + 4 + length) break;
                answers.push({ status: Number(head.split(' ')[1]), body: JSON.parse(received.subarray(end + 4, end + 4 + length).toString()) });
                received = received.subarray(end + 4 + length);
              }
              if (answers.length === 2) resolve();
            });
          });
          socket.on('error', () => undefined); // a reset shows as a missing answer
          socket.write(Buffer.concat([Buffer.from(upload), body, Buffer.from(`GET /api/datasets/${ds.id} HTTP/1.1\r\n${headers}\r\n`)]));
          await done;
          socket.destroy();
          expect(answers.map((a) => a.status)).toEqual([422, 200]);
          return answers[0].body.detail as string;
        };
        const rows = Array.from({ length: 2_000_000 }, (_, k) => `r${k},${k}`).join('\n');
        expect(await post(`s,s\n${rows}\n`)).toContain('"s"');
        // replace: the new column's type is inferred from a sample, holding a row that does not fit `i`; append: an unknown column.
        const sample = await post(`s,i,extra\nx,notanumber,1\n${rows.replaceAll('\n', ',1\n')},1\n`);
        expect(sample).toMatch(mode === 'replace' ? /line 2\b.*"i"/ : /"extra"/);
        await expectUnchanged();
      });

      it('a NUL character in a value: 422 naming the line and column', async () => {
        const plain = await h.upload(ds.id, 's,i\na,1\nb\u0000c,2\nd,3\n', mode);
        expect(plain.status).toBe(422);
        expect(plain.body.detail).toMatch(/line 3\b.*"s".*NUL/);
        const quoted = await h.upload(ds.id, 's,i\n"multi\nline",1\n"x\u0000",2\n', mode);
        expect(quoted.status).toBe(422);
        expect(quoted.body.detail).toMatch(/line 4\b.*"s"/);
        const lines = ['s,i', ...Array.from({ length: 4500 }, (_, k) => `r${k},${k}`), 'nul\u0000,1'];
        const late = await h.upload(ds.id, `${lines.join('\n')}\n`, mode);
        expect(late.status).toBe(422);
        expect(late.body.detail).toMatch(/line 4502\b.*"s"/);
        await expectUnchanged();
      });

      it('an empty body or a header-only problem: 400/422', async () => {
        const empty = await h.upload(ds.id, '', mode);
        expect(empty.status).toBe(400);
        const blank = await h.upload(ds.id, '\n\n', mode);
        expect(blank.status).toBe(400);
        const dupHeader = await h.upload(ds.id, 's,s\na,b\n', mode);
        expect(dupHeader.status).toBe(422);
        expect(dupHeader.body.detail).toContain('"s"');
        await expectUnchanged();
      });

      it('a multipart body cut short or malformed: 400 naming the body, never a 500 or a crash', async () => {
        const boundary = 'cut-here-42';
        const part = (name: string, filename = 'rows.csv') => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${filename}"\r\nContent-Type: text/csv\r\n\r\n`;
        const post = (body: string, contentType = `multipart/form-data; boundary=${boundary}`) =>
          t.request('POST', `/api/datasets/${ds.id}/data?mode=${mode}`, { body, headers: { 'content-type': contentType } });
        const bodies = {
          'no closing boundary': `${part('file')}s,i\nx,10\ny,11\n`,
          'cut mid-CSV': `${part('file')}s,i\nx,10\ny,1`,
          'cut inside a quoted field': `${part('file')}s,i\n"x,10\ny,11\n`,
          'cut in a part header': `--${boundary}\r\nContent-Disposition: form-da`,
          'no file field, cut short': `${part('other')}s,i\nx,10\n`,
          'no file field': `${part('other')}s,i\nx,10\n\r\n--${boundary}--\r\n`,
          'an empty body': '',
        };
        for (const [what, body] of Object.entries(bodies)) {
          const res = await post(body);
          expect(res.status, what).toBe(400);
          expect(res.body.errors?.[0]?.path, what).toMatch(/^body/);
        }
        const noBoundary = await post(`${part('file')}s,i\nx,10\n\r\n--${boundary}--\r\n`, 'multipart/form-data');
        expect(noBoundary.status).toBe(400);
        expect(noBoundary.body.detail).toMatch(/boundary/i);
        // A long file whose form breaks off after many batches were stored.
        const long = ['s,i', ...Array.from({ length: 5000 }, (_, k) => `r${k},${k}`)].join('\n');
        const late = await post(`${part('file')}${long}\n`);
        expect(late.status).toBe(400);
        expect(late.body.detail).toMatch(/Unexpected end of form/);
        await expectUnchanged(); // and the server still answers
      });

      it.each(['multipart', 'text/csv'] as const)('a client gone mid-upload (%s): the load is abandoned, its staging table dropped', async (kind) => {
        const boundary = 'gone-42';
        const csv = ['s,i', ...Array.from({ length: 5000 }, (_, k) => `r${k},${k}`)].join('\n') + '\n';
        const body = kind === 'multipart' ? `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\n${csv}` : csv;
        const url = new URL(t.url);
        const socket = net.connect(Number(url.port), url.hostname);
        await once(socket, 'connect');
        const type = kind === 'multipart' ? `multipart/form-data; boundary=${boundary}` : 'text/csv';
        socket.write(`POST /api/datasets/${ds.id}/data?mode=${mode} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${t.adminToken}\r\nContent-Type: ${type}\r\nContent-Length: ${body.length + 100_000}\r\n\r\n${body}`);
        // Gone once the load has begun (its staging table exists), with the body unfinished.
        await expect.poll(async () => (await h.physicalTables(1)).some((name) => name.includes('_load_')), { timeout: 10_000 }).toBe(true);
        socket.destroy();
        await expect.poll(async () => (await h.physicalTables(1)).filter((name) => name.includes('_load_')), { timeout: 10_000 }).toEqual([]);
        await expectUnchanged();
      });

      it('a wrong content type: 415', async () => {
        const res = await t.request('POST', `/api/datasets/${ds.id}/data?mode=${mode}`, { body: 's,i\na,1\n', headers: { 'content-type': 'application/json' } });
        expect(res.status).toBe(415);
        const json = await t.request('POST', `/api/datasets/${ds.id}/data?mode=${mode}`, { body: { s: 'a', i: 1 } });
        expect(json.status).toBe(415);
        await expectUnchanged();
      });

      it('an unknown mode: 400', async () => {
        const res = await t.request('POST', `/api/datasets/${ds.id}/data?mode=merge`, { body: 's,i\na,1\n', headers: { 'content-type': 'text/csv' } });
        expect(res.status).toBe(400);
        expect(res.body.errors[0].path).toBe('query.mode');
        await expectUnchanged();
      });
    });

    it('takes a multipart form with a `file` field, and refuses one without it', async () => {
      const ds = await h.createDataset(projectId);
      const post = (form: FormData, mode = 'append') =>
        fetch(`${t.url}/api/datasets/${ds.id}/data?mode=${mode}`, { method: 'POST', headers: { authorization: `Bearer ${t.adminToken}` }, body: form });

      const form = new FormData();
      form.append('note', 'first load');
      form.append('file', new Blob(['city,pop\nOslo,709000\nBergen,291000\n'], { type: 'text/csv' }), 'cities.csv');
      const res = await post(form);
      expect(res.status).toBe(200);
      const body = await res.json();
      expect(body).toMatchObject({ rows_loaded: 2, dataset: { row_count: 2, version: 2 } });
      expect(body.dataset.columns.map((c: { name: string; type: string }) => [c.name, c.type])).toEqual([['city', 'string'], ['pop', 'integer']]);

      const replace = new FormData();
      replace.append('file', new Blob(['city,pop\nTromso,77000\n'], { type: 'text/csv' }), 'cities.csv');
      const replaced = await post(replace, 'replace');
      expect(replaced.status).toBe(200);
      expect(await h.allRows(ds.id)).toEqual([{ city: 'Tromso', pop: 77000 }]);

      const noFile = new FormData();
      noFile.append('data', new Blob(['city,pop\nX,1\n'], { type: 'text/csv' }), 'other.csv');
      noFile.append('file_name', 'x');
      const missing = await post(noFile);
      expect(missing.status).toBe(400);
      const problem = await missing.json();
      expect(problem.errors[0].path).toBe('body.file');

      const bad = new FormData();
      bad.append('file', new Blob(['city,pop\nX,1\nY,notanumber\n'], { type: 'text/csv' }), 'bad.csv');
      const refused = await post(bad);
      expect(refused.status).toBe(422);
      expect((await refused.json()).detail).toMatch(/line 3\b.*"pop"/);
      expect((await t.request('GET', `/api/datasets/${ds.id}`)).body).toMatchObject({ row_count: 1, version: 3 });
      expect(await h.allRows(ds.id)).toEqual([{ city: 'Tromso', pop: 77000 }]);
    });

    it('loads a 20,000-row CSV with the right count and values', async () => {
      const ds = await h.createDataset(projectId);
      const n = 20_000;
      const lines = ['id,label,amount,flag,day'];
      for (let k = 1; k <= n; k++) lines.push(`${k},item ${k},${(k * 1.25).toFixed(2)},${k % 3 === 0},2024-${String((k % 12) + 1).padStart(2, '0')}-${String((k % 28) + 1).padStart(2, '0')}`);
      const res = await h.upload(ds.id, `${lines.join('\n')}\n`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({ rows_loaded: n, dataset: { row_count: n, version: 2 } });
      expect(res.body.dataset.columns.map((c: { type: string }) => c.type)).toEqual(['integer', 'string', 'number', 'boolean', 'date']);
      const spot = await h.rows(ds.id, 'filter=id:eq:12345');
      expect(spot.body.rows).toEqual([{ id: 12345, label: 'item 12345', amount: 15431.25, flag: true, day: '2024-10-26' }]);
      const other = await h.rows(ds.id, 'filter=id:eq:19999');
      expect(other.body.rows).toEqual([{ id: 19999, label: 'item 19999', amount: 24998.75, flag: false, day: '2024-08-08' }]);
      const last = await h.rows(ds.id, 'sort=-id&limit=1');
      expect(last.body.rows[0]).toMatchObject({ id: n, label: `item ${n}` });
      const trues = await h.rows(ds.id, 'filter=flag:eq:true&filter=id:lte:30&limit=100');
      expect(trues.body.rows.map((r: Row) => r.id)).toEqual([3, 6, 9, 12, 15, 18, 21, 24, 27, 30]);
    });
  });

  describe('upload size limits', () => {
    let small: TestKernel;
    let sh: ReturnType<typeof helpers>;
    let smallProject: number;

    beforeAll(async () => {
      small = await startTestKernel({ dialect, env: { DATASET_UPLOAD_LIMIT: '1kb', CSV_MAX_FIELD_BYTES: '100', CSV_MAX_RECORD_BYTES: '300', SQL_MAX_RESULT_BYTES: '2048' } });
      sh = helpers(small, dialect);
      smallProject = (await small.request('POST', '/api/projects', { body: { key: 'SMALL', name: 'Small' } })).body.id;
    });
    afterAll(async () => small?.stop());

    it('answers 413 past DATASET_UPLOAD_LIMIT and leaves the dataset as it was, in both modes', async () => {
      const ds = await sh.createDataset(smallProject, [{ name: 'k', type: 'integer' }, { name: 'v', type: 'string' }]);
      const fits = await sh.upload(ds.id, 'k,v\n1,one\n2,two\n');
      expect(fits.status).toBe(200);
      const before = await sh.snapshot(ds.id);
      const big = ['k,v', ...Array.from({ length: 400 }, (_, k) => `${k},value-${k}`)].join('\n');
      expect(Buffer.byteLength(big)).toBeGreaterThan(4 * 1024);
      for (const mode of ['append', 'replace'] as const) {
        const res = await sh.upload(ds.id, big, mode);
        expect(res.status, mode).toBe(413);
        expect(await sh.snapshot(ds.id)).toEqual(before);
      }
      const empty = await sh.createDataset(smallProject);
      expect((await sh.upload(empty.id, big)).status).toBe(413);
      expect((await small.request('GET', `/api/datasets/${empty.id}`)).body).toMatchObject({ row_count: 0, version: 1, columns: [] });
      const table = await sh.tableName(ds.id);
      expect((await sh.physicalTables(1)).filter((name) => name.includes('_load_'))).toEqual([]);
      expect(await sh.physicalTables(1)).toContain(table);
    });

    it('refuses a field past CSV_MAX_FIELD_BYTES (bytes as written, quotes included) with a 422 naming the line it starts on and the limit, in both modes', async () => {
      const ds = await sh.createDataset(smallProject, [{ name: 'k', type: 'integer' }, { name: 'v', type: 'string' }]);
      const atLimit = `k,v\n1,${'x'.repeat(100)}\n2,"${'y'.repeat(98)}"\n3,"${'""'.repeat(49)}"\n`;
      const fits = await sh.upload(ds.id, atLimit);
      expect(fits.status, JSON.stringify(fits.body)).toBe(200);
      expect((await sh.allRows(ds.id)).map((r) => r.v)).toEqual(['x'.repeat(100), 'y'.repeat(98), '"'.repeat(49)]);
      const before = await sh.snapshot(ds.id);
      const over = {
        unquoted: [`k,v\n1,a\n2,${'x'.repeat(101)}\n3,c\n`, 3],
        'multi-byte': [`k,v\n1,a\n2,${'\u00e9'.repeat(51)}\n`, 3], // 51 characters, 102 bytes
        'quoted, after a quoted line break': [`k,v\n1,"multi\nline"\n2,"${'y'.repeat(99)}"\n`, 4],
        'escaped quotes': [`k,v\n1,"${'""'.repeat(50)}"\n`, 2],
        'CRLF lines': [`k,v\r\n1,"a\r\nb"\r\n2,${'x'.repeat(101)}\r\n`, 4],
        'in the header': [`k,${'h'.repeat(101)}\n1,a\n`, 1],
        'a quote never closed': [`k,v\n1,a\n2,"starts here\n${Array.from({ length: 30 }, (_, k) => `${k},row ${k}`).join('\n')}\n`, 3],
      } as const;
      for (const mode of ['append', 'replace'] as const) {
        for (const [what, [csv, line]] of Object.entries(over)) {
          const res = await sh.upload(ds.id, csv, mode);
          expect(res.status, `${mode}, ${what}: ${JSON.stringify(res.body)}`).toBe(422);
          expect(res.body.detail, what).toMatch(new RegExp(`^line ${line}, field \\d: longer than the limit of 100 bytes \\(CSV_MAX_FIELD_BYTES\\)`));
          expect(res.body.errors[0].path).toBe('body');
        }
        expect(await sh.snapshot(ds.id)).toEqual(before);
      }
      expect((await sh.upload(ds.id, over['a quote never closed'][0])).body.detail).toMatch(/quoted field.*closing quote/);
      expect((await sh.physicalTables(1)).filter((name) => name.includes('_load_'))).toEqual([]);
    });

    it('ends a page of rows, and each page of an export, at about SQL_MAX_RESULT_BYTES of values, the rest on the next page', async () => {
      const ds = await sh.createDataset(smallProject, [{ name: 'k', type: 'integer' }, { name: 'v', type: 'string' }, { name: 'secret', type: 'string', pii: true }]);
      const wide = Array.from({ length: 10 }, (_, k) => ({ k, v: String.fromCharCode(97 + k).repeat(500), secret: 'x'.repeat(800) }));
      expect((await sh.appendJson(ds.id, wide)).status).toBe(200);
      // Counted by the database before a row is sent: 500-byte values, a 2048-byte budget.
      const viewer = (await small.userToken('viewer')).token; // the PII column counts as its mask
      const read = async (query: string, token?: string) => {
        const keys: number[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const res = await sh.rows(ds.id, `${query}${cursor ? `&cursor=${cursor}` : ''}`, token);
          expect(res.status, res.text).toBe(200);
          expect(res.body.rows.length).toBeLessThanOrEqual(5);
          keys.push(...res.body.rows.map((r: { k: number }) => r.k));
          cursor = res.body.next_cursor;
          pages += 1;
        } while (cursor);
        return { keys, pages };
      };
      expect(await read('limit=100', viewer)).toEqual({ keys: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], pages: 2 });
      expect(await read('limit=100&sort=-k', viewer)).toEqual({ keys: [9, 8, 7, 6, 5, 4, 3, 2, 1, 0], pages: 2 });
      // The unmasked PII values are counted too: fewer rows a page for whoever sees them.
      expect((await read('limit=100')).pages).toBe(5);
      const exported = await small.request('GET', `/api/datasets/${ds.id}/export?format=json`);
      expect(exported.body.map((r: { k: number }) => r.k)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    });

    it('refuses a record past CSV_MAX_RECORD_BYTES, each of its fields within CSV_MAX_FIELD_BYTES, with a 422 naming its line', async () => {
      const ds = await sh.createDataset(smallProject, [{ name: 'a', type: 'string' }, { name: 'b', type: 'string' }, { name: 'c', type: 'string' }, { name: 'd', type: 'string' }]);
      const fits = await sh.upload(ds.id, `a,b,c,d\n${['w', 'x', 'y', 'z'].map((ch) => ch.repeat(70)).join(',')}\n`);
      expect(fits.status, JSON.stringify(fits.body)).toBe(200);
      const before = await sh.snapshot(ds.id);
      const wide = `a,b,c,d\nq,r,s,t\n${['w', 'x', 'y', 'z'].map((ch) => `"${ch.repeat(90)}"`).join(',')}\n`;
      for (const mode of ['append', 'replace'] as const) {
        const res = await sh.upload(ds.id, wide, mode);
        expect(res.status, `${mode}: ${JSON.stringify(res.body)}`).toBe(422);
        expect(res.body.detail).toMatch(/^line 3: a record longer than the limit of 300 bytes \(CSV_MAX_RECORD_BYTES\)/);
        expect(await sh.snapshot(ds.id)).toEqual(before);
      }
    });
  });

  describe('JSON rows', () => {
    let ds: { id: number };
    beforeAll(async () => {
      ds = await h.createDataset(projectId, [...ALL_TYPES]);
    });

    it('appends an array of objects, missing keys as null', async () => {
      const res = await h.appendJson(ds.id, [
        { s: 'one', i: 1, n: 1.5, b: true, d: '2024-05-01', ts: '2024-05-01T12:00:00+02:00', j: { tags: ['a'], nested: { x: 1 } } },
        { s: 'two', i: -9007199254740991, j: [1, 'two', null] },
        { n: 3, b: false, j: 'just a string' },
      ]);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({ rows_loaded: 3, dataset: { row_count: 3, version: 2 } });
      expect(await h.allRows(ds.id)).toEqual([
        { s: 'one', i: 1, n: 1.5, b: true, d: '2024-05-01', ts: '2024-05-01T10:00:00.000Z', j: { tags: ['a'], nested: { x: 1 } } },
        { s: 'two', i: -9007199254740991, n: null, b: null, d: null, ts: null, j: [1, 'two', null] },
        { s: null, i: null, n: 3, b: false, d: null, ts: null, j: 'just a string' },
      ]);
    });

    it('reads only a row\u2019s own keys: columns named after Object.prototype members are null when missing', async () => {
      const proto = await h.createDataset(projectId, [{ name: 'constructor', type: 'string' }, { name: 'toString', type: 'integer' }, { name: '__proto__', type: 'json' }, { name: 'v', type: 'string' }]);
      const res = await h.appendJson(proto.id, [{ v: 'only v' }, { constructor: 'c', toString: 7, v: 'all' }]);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      // JSON.parse: in an object literal, `__proto__:` would set the prototype instead of a key.
      expect(await h.allRows(proto.id)).toEqual(
        JSON.parse('[{"constructor":null,"toString":null,"__proto__":null,"v":"only v"},{"constructor":"c","toString":7,"__proto__":null,"v":"all"}]'),
      );
    });

    it('refuses unknown keys and wrong types naming the row and column, appending nothing', async () => {
      const before = await h.snapshot(ds.id);
      expect(before.row_count).toBe(3);
      const unknown = await h.appendJson(ds.id, [{ s: 'ok' }, { s: 'ok', zzz: 1 }]);
      expect(unknown.status).toBe(422);
      expect(unknown.body.errors[0].path).toBe('body.1.zzz');
      const cases: [Row, string][] = [
        [{ i: '5' }, 'body.1.i'],
        [{ i: 1.5 }, 'body.1.i'],
        [{ i: 2 ** 60 }, 'body.1.i'],
        [{ d: '31/01/2024' }, 'body.1.d'],
        [{ d: '2024-02-30' }, 'body.1.d'],
        [{ ts: 'yesterday' }, 'body.1.ts'],
        [{ b: 'true' }, 'body.1.b'],
        [{ n: 'NaN' }, 'body.1.n'],
        [{ s: 42 }, 'body.1.s'],
      ];
      for (const [bad, path] of cases) {
        const res = await h.appendJson(ds.id, [{ s: 'fine', i: 7 }, bad]);
        expect(res.status, JSON.stringify(bad)).toBe(422);
        expect(res.body.errors[0].path, JSON.stringify(bad)).toBe(path);
        expect(res.body.detail).toMatch(/row 1\b/);
      }
      expect((await h.appendJson(ds.id, [])).status).toBe(400);
      expect((await h.appendJson(ds.id, { s: 'not an array' })).status).toBe(400);
      expect((await h.appendJson(ds.id, [1, 2])).status).toBe(400);
      expect(await h.snapshot(ds.id)).toEqual(before);
    });

    it('refuses rows for a dataset that has no columns yet', async () => {
      const empty = await h.createDataset(projectId);
      const res = await h.appendJson(empty.id, [{ a: 1 }]);
      expect(res.status).toBe(422);
      expect((await t.request('GET', `/api/datasets/${empty.id}`)).body).toMatchObject({ row_count: 0, version: 1 });
    });
  });

  describe('row queries', () => {
    let paged: { id: number };
    let filtered: { id: number };

    beforeAll(async () => {
      paged = await h.createDataset(projectId, [{ name: 'k', type: 'integer' }, { name: 'g', type: 'string' }, { name: 'v', type: 'integer' }]);
      const items = Array.from({ length: 25 }, (_, idx) => ({ k: idx + 1, g: idx % 2 === 0 ? 'even' : 'odd', v: idx % 5 === 0 ? null : (idx * 7) % 11 }));
      expect((await h.appendJson(paged.id, items)).status).toBe(200);

      filtered = await h.createDataset(projectId, [
        { name: 'name', type: 'string' },
        { name: 'qty', type: 'integer' },
        { name: 'price', type: 'number' },
        { name: 'ok', type: 'boolean' },
        { name: 'day', type: 'date' },
        { name: 'at', type: 'timestamp' },
      ]);
      const csv = [
        'name,qty,price,ok,day,at',
        'Alpha 100%,1,1.5,true,2024-01-01,2024-01-01T08:00:00Z',
        'beta_gamma,2,2.5,false,2024-02-01,2024-02-01T08:00:00Z',
        'BetaXgamma,3,,true,2024-03-01,',
        'alphabet,4,4.5,,2024-04-01,2024-04-01T08:00:00Z',
        ',5,5.5,false,,2024-05-01T08:00:00Z',
      ].join('\n');
      expect((await h.upload(filtered.id, csv)).status).toBe(200);
    });

    const names = async (query: string) => {
      const res = await h.rows(filtered.id, `columns=name&limit=100&${query}`);
      expect(res.status, `${query}: ${JSON.stringify(res.body)}`).toBe(200);
      return res.body.rows.map((r: Row) => r.name);
    };
    const qtys = async (query: string) => {
      const res = await h.rows(filtered.id, `columns=qty&limit=100&${query}`);
      expect(res.status, `${query}: ${JSON.stringify(res.body)}`).toBe(200);
      return res.body.rows.map((r: Row) => r.qty);
    };

    it('walks all rows with limit and cursor, without overlap or gap', async () => {
      const seen: number[] = [];
      const sizes: number[] = [];
      let cursor: string | null = null;
      for (let page = 0; page < 10; page++) {
        const res = await h.rows(paged.id, `limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(res.status).toBe(200);
        seen.push(...res.body.rows.map((r: Row) => r.k as number));
        sizes.push(res.body.rows.length);
        cursor = res.body.next_cursor;
        if (!cursor) break;
      }
      expect(cursor).toBeNull();
      expect(sizes).toEqual([7, 7, 7, 4]);
      expect(seen).toEqual(Array.from({ length: 25 }, (_, k) => k + 1));
      const exact = await h.rows(paged.id, 'limit=25');
      expect(exact.body.rows).toHaveLength(25);
      expect(exact.body.next_cursor).toBeNull();
    });

    it('refuses a cursor it did not issue, and bad limits', async () => {
      for (const cursor of ['garbage!!', 'bm90IGpzb24', Buffer.from(JSON.stringify({ after: 'x' })).toString('base64url'), Buffer.from('{}').toString('base64url')]) {
        const res = await h.rows(paged.id, `cursor=${encodeURIComponent(cursor)}`);
        expect(res.status, cursor).toBe(400);
        expect(res.body.errors[0].path).toBe('query.cursor');
      }
      expect((await h.rows(paged.id, 'limit=0')).status).toBe(400);
      expect((await h.rows(paged.id, 'limit=1001')).status).toBe(400);
      expect((await h.rows(paged.id, 'offset=-1')).status).toBe(400);
    });

    it('sorts ascending and descending with nulls last', async () => {
      const asc = await h.rows(paged.id, 'sort=v&limit=100&columns=k,v');
      expect(asc.status).toBe(200);
      const ascValues = asc.body.rows.map((r: Row) => r.v);
      const nonNull = ascValues.filter((v: unknown) => v !== null) as number[];
      expect(nonNull).toHaveLength(20);
      expect(nonNull).toEqual([...nonNull].sort((a, b) => a - b));
      expect(ascValues.slice(20)).toEqual([null, null, null, null, null]);
      // Ties keep storage order (the hidden row id breaks them).
      const desc = await h.rows(paged.id, 'sort=-v&limit=100&columns=k,v');
      const descValues = desc.body.rows.map((r: Row) => r.v);
      expect(descValues.slice(0, 20)).toEqual([...nonNull].sort((a, b) => b - a));
      expect(descValues.slice(20)).toEqual([null, null, null, null, null]);
      expect(desc.body.rows.slice(20).map((r: Row) => r.k)).toEqual([1, 6, 11, 16, 21]);
      // String collation differs between adapters; where the null goes does not.
      expect((await names('sort=name')).at(-1)).toBeNull();
      expect((await names('sort=-name')).at(-1)).toBeNull();
      const byPrice = await names('sort=-price');
      expect(byPrice).toEqual([null, 'alphabet', 'beta_gamma', 'Alpha 100%', 'BetaXgamma']);
      expect(await qtys('sort=price')).toEqual([1, 2, 4, 5, 3]);
      expect(await qtys('sort=-at')).toEqual([5, 4, 2, 1, 3]);
      expect(await qtys('sort=day')).toEqual([1, 2, 3, 4, 5]);
      expect(await qtys('sort=-day')).toEqual([4, 3, 2, 1, 5]);
      expect(await qtys('sort=-ok')).toEqual([1, 3, 2, 5, 4]);
    });

    it('sorts by several keys', async () => {
      const res = await h.rows(paged.id, 'sort=g,-k&limit=100&columns=g,k');
      expect(res.status).toBe(200);
      const evens = Array.from({ length: 13 }, (_, i) => 25 - 2 * i);
      const odds = Array.from({ length: 12 }, (_, i) => 24 - 2 * i);
      expect(res.body.rows).toEqual([...evens.map((k) => ({ g: 'even', k })), ...odds.map((k) => ({ g: 'odd', k }))]);
      const mixed = await h.rows(paged.id, 'sort=-g,v,k&limit=100&columns=g,v,k');
      const rows = mixed.body.rows as { g: string; v: number | null; k: number }[];
      expect(rows.slice(0, 12).every((r) => r.g === 'odd')).toBe(true);
      const expected = [...rows].sort((a, b) => (a.g === b.g ? (a.v === b.v ? a.k - b.k : a.v === null ? 1 : b.v === null ? -1 : a.v - b.v) : a.g < b.g ? 1 : -1));
      expect(rows).toEqual(expected);
      expect((await h.rows(paged.id, 'sort=g,-nope')).status).toBe(400);
    });

    it('pages a sorted result with cursors and offsets', async () => {
      const full = (await h.rows(paged.id, 'sort=-v,k&limit=100&columns=k')).body.rows.map((r: Row) => r.k);
      expect(full).toHaveLength(25);
      const walked: number[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const res = await h.rows(paged.id, `sort=-v,k&limit=7&columns=k${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(res.status).toBe(200);
        walked.push(...res.body.rows.map((r: Row) => r.k as number));
        cursor = res.body.next_cursor;
        pages++;
      } while (cursor && pages < 10);
      expect(pages).toBe(4);
      expect(walked).toEqual(full);
      const second = await h.rows(paged.id, 'sort=-v,k&limit=7&offset=7&columns=k');
      expect(second.body.rows.map((r: Row) => r.k)).toEqual(full.slice(7, 14));
      const tail = await h.rows(paged.id, 'sort=-v,k&limit=7&offset=21&columns=k');
      expect(tail.body.rows.map((r: Row) => r.k)).toEqual(full.slice(21));
      expect(tail.body.next_cursor).toBeNull();
      const fromOffset = await h.rows(paged.id, 'sort=-v,k&limit=7&offset=14&columns=k');
      const next = await h.rows(paged.id, `sort=-v,k&limit=7&columns=k&cursor=${encodeURIComponent(fromOffset.body.next_cursor)}`);
      expect(next.body.rows.map((r: Row) => r.k)).toEqual(full.slice(21));
    });

    it('selects columns, refusing unknown ones', async () => {
      const res = await h.rows(filtered.id, 'columns=qty,name&limit=2');
      expect(res.status).toBe(200);
      expect(res.body.columns.map(({ name, type }: { name: string; type: string }) => ({ name, type }))).toEqual([{ name: 'qty', type: 'integer' }, { name: 'name', type: 'string' }]);
      expect(res.body.rows).toEqual([{ qty: 1, name: 'Alpha 100%' }, { qty: 2, name: 'beta_gamma' }]);
      expect(Object.keys(res.body.rows[0])).toEqual(['qty', 'name']);
      const unknown = await h.rows(filtered.id, 'columns=qty,secret');
      expect(unknown.status).toBe(400);
      expect(unknown.body.errors[0].path).toBe('query.columns');
      expect((await h.rows(filtered.id, 'columns=_row_id')).status).toBe(400);
    });

    it('filters with eq, ne, lt, lte, gt, gte and in', async () => {
      expect(await qtys('filter=qty:eq:3')).toEqual([3]);
      expect(await qtys('filter=qty:ne:3')).toEqual([1, 2, 4, 5]);
      expect(await qtys('filter=qty:lt:3')).toEqual([1, 2]);
      expect(await qtys('filter=qty:lte:3')).toEqual([1, 2, 3]);
      expect(await qtys('filter=qty:gt:3')).toEqual([4, 5]);
      expect(await qtys('filter=qty:gte:3')).toEqual([3, 4, 5]);
      expect(await qtys('filter=qty:in:1,3,5,99')).toEqual([1, 3, 5]);
      expect(await qtys('filter=price:gt:2')).toEqual([2, 4, 5]);
      expect(await qtys('filter=price:lte:1.5')).toEqual([1]);
      expect(await qtys('filter=ok:eq:true')).toEqual([1, 3]);
      expect(await qtys('filter=ok:eq:false')).toEqual([2, 5]);
      expect(await qtys('filter=day:gte:2024-02-01&filter=day:lt:2024-04-01')).toEqual([2, 3]);
      expect(await qtys('filter=day:in:2024-01-01,2024-04-01')).toEqual([1, 4]);
      expect(await qtys(`filter=${encodeURIComponent('at:eq:2024-02-01T08:00:00Z')}`)).toEqual([2]);
      expect(await qtys(`filter=${encodeURIComponent('at:gt:2024-02-01T09:00:00+02:00')}`)).toEqual([2, 4, 5]);
      expect(await names('filter=name:eq:beta_gamma')).toEqual(['beta_gamma']);
      expect(await names('filter=name:in:alphabet,BetaXgamma')).toEqual(['BetaXgamma', 'alphabet']);
      // Filters combine with AND, with sort and with paging.
      expect(await qtys('filter=qty:gt:1&filter=ok:eq:true')).toEqual([3]);
      const limited = await h.rows(filtered.id, 'columns=qty&filter=qty:gte:2&sort=-qty&limit=2');
      expect(limited.body.rows).toEqual([{ qty: 5 }, { qty: 4 }]);
      expect(limited.body.next_cursor).not.toBeNull();
    });

    it('filters with contains (case-insensitive, % and _ literal) and is_null', async () => {
      expect(await names('filter=name:contains:ALPHA')).toEqual(['Alpha 100%', 'alphabet']);
      expect(await names('filter=name:contains:gamma')).toEqual(['beta_gamma', 'BetaXgamma']);
      expect(await names('filter=name:contains:a_g')).toEqual(['beta_gamma']);
      expect(await names('filter=name:contains:%25')).toEqual(['Alpha 100%']);
      expect(await names('filter=name:contains:0%25')).toEqual(['Alpha 100%']);
      expect(await names('filter=name:contains:zzz')).toEqual([]);
      expect(await qtys('filter=name:is_null:true')).toEqual([5]);
      expect(await qtys('filter=name:is_null:false')).toEqual([1, 2, 3, 4]);
      expect(await qtys('filter=price:is_null:true')).toEqual([3]);
      expect(await qtys('filter=ok:is_null:true')).toEqual([4]);
      expect(await qtys('filter=at:is_null:false&filter=day:is_null:false')).toEqual([1, 2, 4]);
    });

    it('refuses unknown operators, unknown columns and values that do not fit the column', async () => {
      for (const filter of ['qty:like:1', 'qty:between:1', 'qty', 'nope:eq:1', 'qty:eq:abc', 'qty:lt:1.5', 'price:gt:cheap', 'ok:eq:maybe', 'day:gte:2024-13-01', 'day:eq:01/02/2024', 'at:lt:noon', 'qty:in:1,x']) {
        const res = await h.rows(filtered.id, `filter=${encodeURIComponent(filter)}`);
        expect(res.status, filter).toBe(400);
        expect(res.body.errors[0].path, filter).toBe('query.filter');
      }
      const unknownSort = await h.rows(filtered.id, 'sort=nope');
      expect(unknownSort.status).toBe(400);
      expect(unknownSort.body.errors[0].path).toBe('query.sort');
    });
  });

  describe('permissions', () => {
    it('lets a viewer read but not create, load, change or delete', async () => {
      const ds = await h.createDataset(projectId, [{ name: 'a', type: 'integer' }]);
      expect((await h.appendJson(ds.id, [{ a: 1 }])).status).toBe(200);
      const before = await h.snapshot(ds.id);
      expect((await t.request('GET', '/api/datasets', { token: viewer })).status).toBe(200);
      expect((await t.request('GET', `/api/datasets/${ds.id}`, { token: viewer })).body.row_count).toBe(1);
      expect((await h.rows(ds.id, '', viewer)).body.rows).toEqual([{ a: 1 }]);

      expect((await t.request('POST', '/api/datasets', { token: viewer, body: { name: h.unique('viewer'), project_id: projectId } })).status).toBe(403);
      expect((await h.upload(ds.id, 'a\n2\n', 'append', { token: viewer })).status).toBe(403);
      expect((await h.upload(ds.id, 'a\n2\n', 'replace', { token: viewer })).status).toBe(403);
      expect((await h.appendJson(ds.id, [{ a: 2 }], viewer)).status).toBe(403);
      expect((await t.request('PATCH', `/api/datasets/${ds.id}`, { token: viewer, body: { name: 'taken_over' } })).status).toBe(403);
      expect((await t.request('DELETE', `/api/datasets/${ds.id}`, { token: viewer })).status).toBe(403);
      expect(await h.snapshot(ds.id)).toEqual(before);
      expect((await t.request('GET', `/api/datasets/${ds.id}`)).body.name).toBe(ds.name);
    });

    it('answers 401 without a token', async () => {
      const ds = await h.createDataset(projectId, [{ name: 'a', type: 'integer' }]);
      const calls: [string, string, unknown?, Record<string, string>?][] = [
        ['GET', '/api/datasets'],
        ['POST', '/api/datasets', { name: 'anon', project_id: projectId }],
        ['GET', `/api/datasets/${ds.id}`],
        ['PATCH', `/api/datasets/${ds.id}`, { name: 'anon' }],
        ['DELETE', `/api/datasets/${ds.id}`],
        ['POST', `/api/datasets/${ds.id}/data`, 'a\n1\n', { 'content-type': 'text/csv' }],
        ['POST', `/api/datasets/${ds.id}/rows`, [{ a: 1 }]],
        ['GET', `/api/datasets/${ds.id}/rows`],
      ];
      for (const [method, path, body, headers] of calls) {
        expect((await t.request(method, path, { token: null, body, headers })).status, `${method} ${path}`).toBe(401);
      }
      expect((await t.request('GET', `/api/datasets/${ds.id}`)).body).toMatchObject({ name: ds.name, row_count: 0, version: 1 });
    });
  });

  describe('organizations', () => {
    it('hides one organization\u2019s datasets from another: 404, 403 with X-Org-Id, never listed', async () => {
      const mine = await h.createDataset(projectId, [{ name: 'secret', type: 'string' }]);
      expect((await h.upload(mine.id, 'secret\nclassified\n')).status).toBe(200);
      // A row policy of ours, which the outsider must be able neither to see nor to remove.
      const readers = await t.request('POST', '/api/groups', { body: { name: h.unique('readers'), capabilities: [] } });
      expect(readers.status).toBe(201);
      const policy = await t.request('POST', `/api/datasets/${mine.id}/row-policies`, { body: { group_id: readers.body.id, filters: ['secret:eq:classified'] } });
      expect(policy.status).toBe(201);
      // The outsider administers their own organization, so the org.admin routes below answer
      // from the tenancy check, not from a missing capability.
      const theirAdmins = await t.request('POST', '/api/groups', { body: { name: h.unique('their_admins'), capabilities: ['org.admin'] }, headers: { 'x-org-id': String(otherOrgId) } });
      expect(theirAdmins.status).toBe(201);
      expect((await t.request('POST', `/api/groups/${theirAdmins.body.id}/members`, { body: { user_id: otherUserId }, headers: { 'x-org-id': String(otherOrgId) } })).status).toBe(201);
      const theirs = await h.createDataset(otherProjectId, [{ name: 'x', type: 'integer' }], { token: otherToken });
      expect((await t.request('GET', `/api/datasets/${theirs.id}/row-policies`, { token: otherToken })).status).toBe(200);
      const before = await h.snapshot(mine.id);
      const calls: [string, string, unknown?, Record<string, string>?][] = [
        ['GET', `/api/datasets/${mine.id}`],
        ['PATCH', `/api/datasets/${mine.id}`, { name: 'hijacked' }],
        ['DELETE', `/api/datasets/${mine.id}`],
        ['POST', `/api/datasets/${mine.id}/data`, 'secret\nleaked\n', { 'content-type': 'text/csv' }],
        ['POST', `/api/datasets/${mine.id}/data?mode=replace`, 'secret\nwiped\n', { 'content-type': 'text/csv' }],
        ['POST', `/api/datasets/${mine.id}/rows`, [{ secret: 'leaked' }]],
        ['GET', `/api/datasets/${mine.id}/rows`],
        ['GET', `/api/datasets/${mine.id}/export`],
        ['GET', `/api/datasets/${mine.id}/export?format=csv`],
        ['GET', `/api/datasets/${mine.id}/export?format=json`],
        ['DELETE', `/api/datasets/${mine.id}/row-policies/${policy.body.id}`],
      ];
      for (const [method, path, body, headers] of calls) {
        const res = await t.request(method, path, { token: otherToken, body, headers });
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.text).not.toContain('classified');
        const forced = await t.request(method, path, { token: otherToken, body, headers: { ...headers, 'x-org-id': '1' } });
        expect(forced.status, `${method} ${path} with X-Org-Id`).toBe(403);
        expect(forced.text).not.toContain('classified');
      }
      const multipart = new FormData();
      multipart.append('file', new Blob(['secret\nleaked\n']), 'x.csv');
      const viaForm = await fetch(`${t.url}/api/datasets/${mine.id}/data`, { method: 'POST', headers: { authorization: `Bearer ${otherToken}` }, body: multipart });
      expect(viaForm.status).toBe(404);
      await viaForm.body?.cancel();

      const theirList = await t.request('GET', '/api/datasets?limit=500', { token: otherToken });
      expect(theirList.status).toBe(200);
      expect(theirList.body.items.every((d: { org_id: number }) => d.org_id === otherOrgId)).toBe(true);
      expect(theirList.body.items.map((d: { id: number }) => d.id)).not.toContain(mine.id);
      expect((await t.request('GET', `/api/datasets?search=${mine.name}`, { token: otherToken })).body.total).toBe(0);
      expect((await t.request('GET', `/api/datasets?project_id=${projectId}`, { token: otherToken })).body.total).toBe(0);
      // Nor through their own dataset, naming our policy's id.
      expect((await t.request('DELETE', `/api/datasets/${theirs.id}/row-policies/${policy.body.id}`, { token: otherToken })).status).toBe(404);
      expect((await t.request('GET', `/api/datasets/${mine.id}/row-policies`)).body).toEqual([policy.body]);
      expect(await h.snapshot(mine.id)).toEqual(before);
      expect((await t.request('GET', `/api/datasets/${mine.id}`)).body.name).toBe(mine.name);
    });

    it('lets two organizations have a dataset of the same name with their rows apart', async () => {
      const mine = await h.createDataset(projectId, [], { name: 'shared_name' });
      const theirs = await h.createDataset(otherProjectId, [], { name: 'shared_name', token: otherToken });
      expect(theirs.org_id).toBe(otherOrgId);
      expect(theirs.id).not.toBe(mine.id);
      expect((await h.upload(mine.id, 'who,n\nours,1\nours,2\n')).status).toBe(200);
      const loaded = await h.upload(theirs.id, 'who,n\ntheirs,10\n', 'append', { token: otherToken });
      expect(loaded.status, JSON.stringify(loaded.body)).toBe(200);
      expect(await h.allRows(mine.id)).toEqual([{ who: 'ours', n: 1 }, { who: 'ours', n: 2 }]);
      expect(await h.allRows(theirs.id, otherToken)).toEqual([{ who: 'theirs', n: 10 }]);
      expect((await h.appendJson(theirs.id, [{ who: 'theirs', n: 11 }], otherToken)).status).toBe(200);
      expect((await t.request('GET', `/api/datasets/${theirs.id}`, { token: otherToken })).body.row_count).toBe(2);
      expect((await t.request('GET', `/api/datasets/${mine.id}`)).body.row_count).toBe(2);
      expect((await t.request('GET', `/api/datasets/${theirs.id}`)).status).toBe(404);
      // Physically apart too: each table sits in its own organization's namespace.
      expect(await h.physicalTables(otherOrgId)).toContain(await h.tableName(theirs.id));
      expect(await h.physicalTables(1)).not.toContain(await h.tableName(theirs.id));
      // Deleting theirs leaves ours alone.
      expect((await t.request('DELETE', `/api/datasets/${theirs.id}`, { token: otherToken })).status).toBe(204);
      expect(await h.allRows(mine.id)).toEqual([{ who: 'ours', n: 1 }, { who: 'ours', n: 2 }]);
    });
  });
});
