import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeDrift } from '../../plugins/datasets/contracts.ts';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';

describe('drift classification', () => {
  const contract = [
    { name: 'id', type: 'integer' as const },
    { name: 'day', type: 'date' as const },
    { name: 'label', type: 'string' as const },
  ];
  it('is ok when nothing changed and no-contract without a baseline', () => {
    expect(computeDrift(contract, contract)).toEqual({ status: 'ok', changes: [] });
    expect(computeDrift(null, contract)).toEqual({ status: 'no-contract', changes: [] });
  });
  it('calls added columns and the documented widenings additive', () => {
    const live = [
      { name: 'id', type: 'number' as const },
      { name: 'day', type: 'timestamp' as const },
      { name: 'label', type: 'string' as const },
      { name: 'extra', type: 'boolean' as const },
    ];
    expect(computeDrift(contract, live)).toEqual({
      status: 'additive',
      changes: [
        { column: 'id', change: 'type_changed', from: 'integer', to: 'number', severity: 'additive' },
        { column: 'day', change: 'type_changed', from: 'date', to: 'timestamp', severity: 'additive' },
        { column: 'extra', change: 'added', to: 'boolean', severity: 'additive' },
      ],
    });
  });
  it('calls a removed column or a narrowing breaking', () => {
    expect(computeDrift(contract, [{ name: 'id', type: 'integer' }, { name: 'day', type: 'date' }])).toEqual({
      status: 'breaking',
      changes: [{ column: 'label', change: 'removed', from: 'string', severity: 'breaking' }],
    });
    expect(computeDrift([{ name: 'n', type: 'number' }], [{ name: 'n', type: 'integer' }]).status).toBe('breaking');
    expect(computeDrift([{ name: 'n', type: 'string' }], [{ name: 'n', type: 'json' }]).status).toBe('breaking');
  });
});

describe.each(DIALECTS)('schema contracts and drift (%s)', (dialect) => {
  let t: TestKernel;
  let viewer: string;
  let datasetId: number;
  const upload = (csv: string, mode = 'replace') =>
    t.request('POST', `/api/datasets/${datasetId}/data?mode=${mode}`, { body: csv, headers: { 'content-type': 'text/csv' } });

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    viewer = (await t.userToken('viewer')).token;
    const project = await t.request('POST', '/api/projects', { body: { key: 'DQ', name: 'Contracts' } });
    datasetId = (await t.request('POST', '/api/datasets', { body: { name: 'orders', project_id: project.body.id } })).body.id;
  });
  afterAll(async () => t?.stop());

  it('has no contract at first', async () => {
    expect((await t.request('GET', `/api/datasets/${datasetId}/contract`)).status).toBe(404);
    expect((await t.request('GET', `/api/datasets/${datasetId}/drift`)).body).toMatchObject({ status: 'no-contract', contract_version: null, changes: [] });
    expect((await t.request('POST', `/api/datasets/${datasetId}/contract`)).status).toBe(422); // nothing to capture yet
  });

  it('captures the live schema; drift is ok until the schema moves', async () => {
    expect((await upload('id,amount,day\n1,10,2024-01-01\n')).status).toBe(200);
    const captured = await t.request('POST', `/api/datasets/${datasetId}/contract`);
    expect(captured.status).toBe(201);
    expect(captured.body).toMatchObject({ version: 1, is_current: true, columns: [{ name: 'id', type: 'integer' }, { name: 'amount', type: 'integer' }, { name: 'day', type: 'date' }] });
    expect((await t.request('GET', `/api/datasets/${datasetId}/contract`)).body.version).toBe(1);
    expect((await t.request('GET', `/api/datasets/${datasetId}/drift`)).body).toMatchObject({ status: 'ok', contract_version: 1, changes: [] });
    expect((await t.request('POST', `/api/datasets/${datasetId}/contract`, { token: viewer })).status).toBe(403);
    expect((await t.request('GET', `/api/datasets/${datasetId}/drift`, { token: viewer })).status).toBe(200);
  });

  it('reports an added column as additive and a removed one as breaking', async () => {
    expect((await upload('id,amount,day,note\n2,20,2024-01-02,hello\n')).status).toBe(200);
    expect((await t.request('GET', `/api/datasets/${datasetId}/drift`)).body).toMatchObject({
      status: 'additive',
      changes: [{ column: 'note', change: 'added', to: 'string', severity: 'additive' }],
    });
    expect((await upload('id,note\n3,bye\n')).status).toBe(200);
    const drift = await t.request('GET', `/api/datasets/${datasetId}/drift`);
    expect(drift.body.status).toBe('breaking');
    expect(drift.body.changes).toEqual([
      { column: 'amount', change: 'removed', from: 'integer', severity: 'breaking' },
      { column: 'day', change: 'removed', from: 'date', severity: 'breaking' },
      { column: 'note', change: 'added', to: 'string', severity: 'additive' },
    ]);
  });

  it('keeps exactly one current contract and the history of earlier ones', async () => {
    const second = await t.request('POST', `/api/datasets/${datasetId}/contract`);
    expect(second.body).toMatchObject({ version: 2, is_current: true });
    const history = await t.request('GET', `/api/datasets/${datasetId}/contract/history`);
    expect(history.body.map((c: { version: number; is_current: boolean }) => [c.version, c.is_current])).toEqual([
      [2, true],
      [1, false],
    ]);
    expect((await t.request('GET', `/api/datasets/${datasetId}/drift`)).body).toMatchObject({ status: 'ok', contract_version: 2 });
    const current = await t.kernel.storage.db.selectFrom('dataset_contracts').select('version').where('dataset_id', '=', datasetId).where('is_current', '=', true).execute();
    expect(current).toEqual([{ version: 2 }]);
    // The database itself refuses a second current contract.
    await expect(
      t.kernel.storage.db
        .insertInto('dataset_contracts')
        .values({ dataset_id: datasetId, org_id: 1, version: 99, columns: '[]', is_current: true, created_at: new Date().toISOString() })
        .execute(),
    ).rejects.toThrow();
  });

  it('captures one after the other when captures come at once', async () => {
    const answers = await Promise.all(Array.from({ length: 6 }, () => t.request('POST', `/api/datasets/${datasetId}/contract`)));
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(201));
    const versions = answers.map((a) => a.body.version).sort((a: number, b: number) => a - b);
    expect(new Set(versions).size).toBe(6);
    const current = await t.kernel.storage.db.selectFrom('dataset_contracts').select('version').where('dataset_id', '=', datasetId).where('is_current', '=', true).execute();
    expect(current).toEqual([{ version: versions[5] }]);
  });

  it('keeps contracts inside their organization', async () => {
    const { token } = await t.outsider('outsider');
    for (const [method, path] of [
      ['GET', 'contract'],
      ['GET', 'contract/history'],
      ['POST', 'contract'],
      ['GET', 'drift'],
    ] as const) {
      expect((await t.request(method, `/api/datasets/${datasetId}/${path}`, { token })).status, `${method} ${path}`).toBe(404);
      expect((await t.request(method, `/api/datasets/${datasetId}/${path}`, { token, headers: { 'x-org-id': '1' } })).status, `${method} ${path}`).toBe(403);
    }
  });
});
