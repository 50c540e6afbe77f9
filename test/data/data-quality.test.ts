import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, until, type TestKernel } from '../harness/index.ts';

describe.each(DIALECTS)('data-quality rules (%s)', (dialect) => {
  let t: TestKernel;
  let viewer: string;
  let datasetId: number;
  const createRule = (body: Record<string, unknown>) => t.request('POST', '/api/data-quality/rules', { body: { dataset_id: datasetId, ...body } });
  const runRule = async (body: Record<string, unknown>) => {
    const rule = await createRule({ name: String(body.type), ...body });
    expect(rule.status, JSON.stringify(rule.body)).toBe(201);
    const run = await t.request('POST', `/api/data-quality/rules/${rule.body.id}/run`);
    expect(run.status).toBe(200);
    return run.body;
  };

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    viewer = (await t.userToken('viewer')).token;
    const project = await t.request('POST', '/api/projects', { body: { key: 'QUALITY', name: 'Quality' } });
    const dataset = await t.request('POST', '/api/datasets', {
      body: {
        name: 'customers',
        project_id: project.body.id,
        columns: [
          { name: 'id', type: 'integer' },
          { name: 'email', type: 'string', pii: true },
          { name: 'age', type: 'integer' },
          { name: 'country', type: 'string' },
          { name: 'signed_up', type: 'timestamp' },
        ],
      },
    });
    datasetId = dataset.body.id;
    const now = new Date().toISOString();
    const csv = [
      'id,email,age,country,signed_up',
      `1,a@example.test,34,FR,${now}`,
      `2,b@example.test,17,DE,${now}`,
      `3,not-an-email,45,FR,${now}`,
      `4,,130,XX,2020-01-01T00:00:00Z`,
      `4,e@example.test,28,IT,2020-01-02T00:00:00Z`,
    ].join('\n');
    expect((await t.request('POST', `/api/datasets/${datasetId}/data`, { body: `${csv}\n`, headers: { 'content-type': 'text/csv' } })).status).toBe(200);
  });
  afterAll(async () => t?.stop());

  it('finds nulls, duplicates, out-of-range values, pattern misses and disallowed values, with a sample', async () => {
    expect(await runRule({ type: 'not_null', params: { column: 'email' } })).toMatchObject({ status: 'failed', failing_rows: 1, message: '1 of 5 rows fail' });
    const unique = await runRule({ type: 'unique', params: { column: 'id' } });
    expect(unique).toMatchObject({ status: 'failed', failing_rows: 2 });
    expect(unique.sample.map((r: { id: number }) => r.id)).toEqual([4, 4]);
    const range = await runRule({ type: 'range', params: { column: 'age', min: 18, max: 120 } });
    expect(range).toMatchObject({ status: 'failed', failing_rows: 2 });
    expect(range.sample.map((r: { age: number }) => r.age)).toEqual([17, 130]);
    expect(await runRule({ type: 'pattern', params: { column: 'email', pattern: '^[^@]+@[^@]+$' } })).toMatchObject({ status: 'failed', failing_rows: 1 });
    expect(await runRule({ type: 'allowed_values', params: { column: 'country', values: ['FR', 'DE', 'IT'] } })).toMatchObject({ status: 'failed', failing_rows: 1 });
    expect(await runRule({ type: 'range', params: { column: 'age', min: 0 } })).toMatchObject({ status: 'passed', failing_rows: 0, sample: [] });
  });

  it('never keeps personal data in a run: PII columns of the sample are masked', async () => {
    const run = await runRule({ type: 'range', params: { column: 'age', max: 20 } });
    expect(run.sample.map((r: { id: number; email: string | null }) => [r.id, r.email])).toEqual([
      [1, '***'],
      [3, '***'],
      [4, null],
      [4, '***'],
    ]);
    const stored = await t.kernel.storage.db.selectFrom('dq_runs').select('sample').execute();
    expect(JSON.stringify(stored)).not.toContain('@example.test');
  });

  it('checks a custom SQL condition through the governed SQL path', async () => {
    const run = await runRule({ type: 'custom_sql', params: { condition: "age >= 18 and country <> 'XX'" } });
    expect(run).toMatchObject({ status: 'failed', failing_rows: 2 });
    expect(run.sample.map((r: { id: number }) => r.id).sort()).toEqual([2, 4]);
    for (const row of run.sample) expect(row.email === null || row.email === '***').toBe(true);
    expect(await runRule({ type: 'custom_sql', params: { condition: 'id > 0' } })).toMatchObject({ status: 'passed', failing_rows: 0 });
    // A condition the governed path refuses is refused when the rule is created.
    for (const condition of ['nope > 1', '1 = 1; delete from customers', 'id in (select id from users)', "pg_read_file('x') is not null"]) {
      const res = await createRule({ name: 'bad', type: 'custom_sql', params: { condition } });
      expect(res.status, condition).toBe(400);
      expect(res.body.errors[0].path, condition).toBe('body.params.condition');
    }
    const audit = await t.request('GET', '/api/audit?action=sql.execute&limit=5');
    expect(audit.body.items.length).toBeGreaterThan(0);
  });

  it('keeps a custom SQL condition to its dataset however it is spelled, and quotes the dataset name (a keyword here)', async () => {
    const leak = /scrypt\$|one-time token|SCRAM-SHA-256\$|root:x:0/i;
    const conditions = [
      "'a\\' = 'a' or (select group_concat(username||char(58)||password_hash) from users) is not null or '/*' = '*/'",
      "'a\\' = 'a' or (select string_agg(password_hash, ',') from users) is not null or '/*' = '*/'",
      'id > 0) union select password_hash from users --',
      '1 = 1) or (select count(*) from mail_outbox) > 0 or (1 = 1',
      'exists (select 1 from pg_authid)',
      "(select count(*) from ts_stat('select to_tsvector(password_hash) from users')) > 0",
      'id > 0 /* /* */ or (select count(*) from personal_access_tokens) > 0 -- */',
      "email <> '' --",
    ];
    for (const condition of conditions) {
      const res = await createRule({ name: 'hostile', type: 'custom_sql', params: { condition } });
      expect(res.text, condition).not.toMatch(leak);
      if (res.status === 201) {
        // Only a condition the database reads as one over the dataset's own columns is kept.
        const run = await t.request('POST', `/api/data-quality/rules/${res.body.id}/run`);
        expect(run.text, condition).not.toMatch(leak);
        await t.request('DELETE', `/api/data-quality/rules/${res.body.id}`);
      } else {
        expect(res.status, condition).toBe(400);
        expect(res.body.errors[0].path, condition).toBe('body.params.condition');
      }
    }
    const project = await t.request('POST', '/api/projects', { body: { key: 'SPACED', name: 'Spaced' } });
    const spaced = await t.request('POST', '/api/datasets', { body: { name: 'Order', project_id: project.body.id, columns: [{ name: 'n', type: 'integer' }] } });
    await t.request('POST', `/api/datasets/${spaced.body.id}/rows`, { body: [{ n: 1 }, { n: -1 }] });
    const rule = await t.request('POST', '/api/data-quality/rules', { body: { dataset_id: spaced.body.id, name: 'positive', type: 'custom_sql', params: { condition: 'n > 0' } } });
    expect(rule.status, rule.text).toBe(201);
    expect((await t.request('POST', `/api/data-quality/rules/${rule.body.id}/run`)).body).toMatchObject({ status: 'failed', failing_rows: 1 });
  });

  it('checks dataset-level rules: row count and freshness', async () => {
    expect(await runRule({ type: 'row_count_between', params: { min: 1, max: 10 } })).toMatchObject({ status: 'passed', observed: 5 });
    expect(await runRule({ type: 'row_count_between', params: { min: 6 } })).toMatchObject({ status: 'failed', observed: 5 });
    expect(await runRule({ type: 'freshness', params: { column: 'signed_up', max_age_hours: 1 } })).toMatchObject({ status: 'passed' });
    expect(await runRule({ type: 'freshness', params: { max_age_hours: 1 } })).toMatchObject({ status: 'passed' });
    const stale = await runRule({ type: 'freshness', params: { column: 'signed_up', max_age_hours: 0.0000001 } });
    expect(stale.status).toBe('failed');
  });

  it('refuses bad rules naming the field, and nothing is created', async () => {
    const before = (await t.request('GET', `/api/data-quality/rules?dataset_id=${datasetId}`)).body.length;
    const cases: [Record<string, unknown>, number, string][] = [
      [{ name: 'x', type: 'nope', params: {} }, 400, 'body.type'],
      [{ name: 'x', type: 'not_null', params: {} }, 400, 'body.params.column'],
      [{ name: 'x', type: 'not_null', params: { column: 'missing' } }, 422, 'body.params.column'],
      [{ name: 'x', type: 'range', params: { column: 'age' } }, 400, 'body.params'],
      [{ name: 'x', type: 'range', params: { column: 'age', min: 5, max: 1 } }, 400, 'body.params'],
      [{ name: 'x', type: 'range', params: { column: 'country', min: 1 } }, 422, 'body.params.column'],
      [{ name: 'x', type: 'pattern', params: { column: 'email', pattern: '([' } }, 400, 'body.params.pattern'],
      [{ name: 'x', type: 'allowed_values', params: { column: 'country', values: [] } }, 400, 'body.params.values'],
      [{ name: 'x', type: 'freshness', params: { column: 'country', max_age_hours: 1 } }, 422, 'body.params.column'],
      [{ name: 'x', type: 'not_null', params: { column: 'id', extra: 1 } }, 400, 'body.params.extra'],
    ];
    for (const [body, status, path] of cases) {
      const res = await createRule(body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(res.body.errors[0].path, JSON.stringify(body)).toBe(path);
    }
    expect((await t.request('GET', `/api/data-quality/rules?dataset_id=${datasetId}`)).body.length).toBe(before);
  });

  /** A dataset of one text column `s` holding `values`, in a project of its own. */
  const textDataset = async (name: string, values: string[]) => {
    const project = await t.request('POST', '/api/projects', { body: { key: name.toUpperCase(), name } });
    const dataset = await t.request('POST', '/api/datasets', { body: { name, project_id: project.body.id, columns: [{ name: 's', type: 'string' }] } });
    expect(dataset.status, dataset.text).toBe(201);
    const csv = ['s', ...values.map((v) => `"${v}"`)].join('\n');
    expect((await t.request('POST', `/api/datasets/${dataset.body.id}/data`, { body: `${csv}\n`, headers: { 'content-type': 'text/csv' } })).status).toBe(200);
    return dataset.body.id as number;
  };
  const runPattern = async (id: number, pattern: string) => {
    const rule = await t.request('POST', '/api/data-quality/rules', { body: { dataset_id: id, name: `pattern ${pattern}`, type: 'pattern', params: { column: 's', pattern } } });
    expect(rule.status, JSON.stringify(rule.body)).toBe(201);
    const run = await t.request('POST', `/api/data-quality/rules/${rule.body.id}/run`);
    expect(run.status, run.text).toBe(200);
    return run.body;
  };
  // A backtracking engine takes seconds per value on this (2^28 ways to split the a's): RE2 is linear.
  const EVIL = `${'a'.repeat(28)}!`;

  it('runs the catastrophic pattern ^(a+)+$ in linear time, with the right result', async () => {
    const id = await textDataset('evil', [EVIL, 'aaaa', EVIL, 'a', EVIL]);
    const run = await runPattern(id, '^(a+)+$');
    expect(run).toMatchObject({ status: 'failed', failing_rows: 3, message: '3 of 5 rows fail' });
    expect(run.sample.map((r: { s: string }) => r.s)).toEqual([EVIL, EVIL, EVIL]);
    expect(await runPattern(id, '^(a+)+!?$')).toMatchObject({ status: 'passed', failing_rows: 0 });
  });

  it('answers GET /healthz while a rule runs the catastrophic pattern over thousands of values', async () => {
    const id = await textDataset('evil_many', Array.from({ length: 3000 }, (_, i) => (i % 3 ? EVIL : 'aaaaaaaa')));
    const rule = await t.request('POST', '/api/data-quality/rules', { body: { dataset_id: id, name: 'evil', type: 'pattern', params: { column: 's', pattern: '^(a+)+$' } } });
    expect(rule.status).toBe(201);
    const running = t.request('POST', `/api/data-quality/rules/${rule.body.id}/run`);
    const health = await t.request('GET', '/healthz', { token: null });
    expect(health.status).toBe(200);
    const run = await running;
    expect(run.status).toBe(200);
    expect(run.body).toMatchObject({ status: 'failed', failing_rows: 2000, message: '2000 of 3000 rows fail' });
  });

  it('refuses at save a pattern the engine that runs it cannot compile, naming body.params.pattern', async () => {
    const id = await textDataset('patterns_saved', ['ab']);
    const save = (pattern: string) => t.request('POST', '/api/data-quality/rules', { body: { dataset_id: id, name: 'p', type: 'pattern', params: { column: 's', pattern } } });
    // RE2 on SQLite: no backreferences, lookaround or possessive quantifiers (they need backtracking).
    // Postgres runs its own POSIX flavour, which has backreferences and lookahead but not (?P<name>…).
    const refused = ['a*+', '(', '(?P<n>a)x(', ...(dialect === 'sqlite' ? ['(a)\\1', '(?=a)', '(?<!a)b'] : ['(?P<n>a)'])];
    for (const pattern of refused) {
      const res = await save(pattern);
      expect(res.status, pattern).toBe(400);
      expect(res.body.errors[0].path, pattern).toBe('body.params.pattern');
    }
    const accepted = ['(?i)^AB$', '\\d+', '[[:alpha:]]+', ...(dialect === 'sqlite' ? ['(?P<n>a)'] : ['(a)\\1', '(?=a)'])];
    for (const pattern of accepted) expect((await save(pattern)).status, pattern).toBe(201);
    // A change of parameters is checked the same way.
    const rule = await save('^a');
    const patch = await t.request('PATCH', `/api/data-quality/rules/${rule.body.id}`, { body: { params: { column: 's', pattern: 'a*+' } } });
    expect(patch.status).toBe(400);
    expect(patch.body.errors[0].path).toBe('body.params.pattern');
    expect((await t.request('GET', `/api/data-quality/rules/${rule.body.id}`)).body.params.pattern).toBe('^a');
  });

  it('keeps pattern behaviour on both adapters: anchors, classes, case', async () => {
    const id = await textDataset('patterns_kept', ['ABC-1234', 'abc-1234', 'xABC-1234y', 'ABC-12345']);
    const failing = async (pattern: string) => (await runPattern(id, pattern)).failing_rows;
    expect(await failing('^[A-Z]{3}-[0-9]{4}$')).toBe(3);
    expect(await failing('[A-Z]{3}-[0-9]{4}')).toBe(1);
    expect(await failing('^abc')).toBe(3);
    expect(await failing('(?i)^abc')).toBe(1);
    expect(await failing('^[[:upper:]]+-\\d+$')).toBe(2);
    expect(await failing('^\\w+-\\d{4,5}$')).toBe(1);
    expect(await failing('4$')).toBe(2);
    expect(await failing('.')).toBe(0);
  });

  it.runIf(dialect === 'postgres')('stops a rule whose query runs past DATA_QUALITY_TIMEOUT_MS: status error, timed out, not a 500', async () => {
    const slow = await startTestKernel({ dialect, env: { DATA_QUALITY_TIMEOUT_MS: '100' } });
    try {
      const project = await slow.request('POST', '/api/projects', { body: { key: 'SLOW', name: 'Slow' } });
      const dataset = await slow.request('POST', '/api/datasets', { body: { name: 'slow', project_id: project.body.id, columns: [{ name: 's', type: 'string' }] } });
      expect((await slow.request('POST', `/api/datasets/${dataset.body.id}/rows`, { body: Array.from({ length: 5 }, () => ({ s: 'a'.repeat(600) })) })).status).toBe(200);
      // A backreference makes Postgres' engine search: close to a second per value here.
      const rule = await slow.request('POST', '/api/data-quality/rules', { body: { dataset_id: dataset.body.id, name: 'slow', type: 'pattern', params: { column: 's', pattern: '^(a{1,200}){1,200}\\1$' } } });
      expect(rule.status, rule.text).toBe(201);
      const run = await slow.request('POST', `/api/data-quality/rules/${rule.body.id}/run`);
      expect(run.status).toBe(200);
      expect(run.body).toMatchObject({ status: 'error', failing_rows: 0 });
      expect(run.body.message).toMatch(/timed out/);
      const report = await slow.request('POST', `/api/data-quality/datasets/${dataset.body.id}/run`);
      expect(report.status).toBe(200);
      expect(report.body.status).toBe('failed');
      expect(report.body.runs[0].message).toMatch(/timed out/);
    } finally {
      await slow.stop();
    }
  });

  it('runs every enabled rule of a dataset and summarises by severity, keeping history', async () => {
    const project = await t.request('POST', '/api/projects', { body: { key: 'SUMMARY', name: 'Summary' } });
    const dataset = await t.request('POST', '/api/datasets', { body: { name: 'small', project_id: project.body.id, columns: [{ name: 'v', type: 'integer' }] } });
    await t.request('POST', `/api/datasets/${dataset.body.id}/rows`, { body: [{ v: 1 }, { v: null }] });
    const rule = (body: Record<string, unknown>) => t.request('POST', '/api/data-quality/rules', { body: { dataset_id: dataset.body.id, ...body } });
    const warn = await rule({ name: 'no nulls', type: 'not_null', params: { column: 'v' }, severity: 'warn' });
    await rule({ name: 'small', type: 'row_count_between', params: { max: 10 } });
    await rule({ name: 'disabled', type: 'row_count_between', params: { min: 100 }, enabled: false });
    const report = await t.request('POST', `/api/data-quality/datasets/${dataset.body.id}/run`);
    expect(report.body.status).toBe('warned');
    expect(report.body.runs).toHaveLength(2);
    const error = await rule({ name: 'big', type: 'row_count_between', params: { min: 5 } });
    expect((await t.request('POST', `/api/data-quality/datasets/${dataset.body.id}/run`)).body.status).toBe('failed');
    await t.request('PATCH', `/api/data-quality/rules/${error.body.id}`, { body: { enabled: false } });
    await t.request('PATCH', `/api/data-quality/rules/${warn.body.id}`, { body: { params: { column: 'v' }, severity: 'warn', name: 'renamed' } });
    expect((await t.request('POST', `/api/datasets/${dataset.body.id}/rows`, { body: [{ v: 2 }] })).status).toBe(200);
    await t.request('PATCH', `/api/data-quality/rules/${warn.body.id}`, { body: { enabled: false } });
    expect((await t.request('POST', `/api/data-quality/datasets/${dataset.body.id}/run`)).body.status).toBe('passed');
    const history = await t.request('GET', `/api/data-quality/rules/${warn.body.id}/runs`);
    expect(history.body.map((r: { status: string }) => r.status)).toEqual(['failed', 'failed']);
    expect(history.body[0].dataset_version).toBeGreaterThanOrEqual(history.body[1].dataset_version);
  });

  it('refuses a rule on a PII column to a caller without datasets.pii.read (403): its count would answer guesses', async () => {
    const editor = (await t.userToken('editor')).token;
    const onEmail = { dataset_id: datasetId, name: 'guess', type: 'allowed_values', params: { column: 'email', values: ['a@example.test'] } };
    const refused = await t.request('POST', '/api/data-quality/rules', { token: editor, body: onEmail });
    expect(refused.status).toBe(403);
    expect(refused.body.detail).toMatch(/PII column.*datasets\.pii\.read/);
    expect((await t.request('POST', '/api/data-quality/rules', { token: editor, body: { ...onEmail, type: 'pattern', params: { column: 'email', pattern: '^a' } } })).status).toBe(403);
    // Allowed on other columns, and a rule made by someone who may read the column cannot be retargeted.
    expect((await t.request('POST', '/api/data-quality/rules', { token: editor, body: { ...onEmail, params: { column: 'country', values: ['FR'] } } })).status).toBe(201);
    const admins = await createRule({ name: 'admin email check', type: 'not_null', params: { column: 'email' } });
    expect(admins.status).toBe(201);
    expect((await t.request('PATCH', `/api/data-quality/rules/${admins.body.id}`, { token: editor, body: { params: { column: 'email' } } })).status).toBe(403);
    expect((await t.request('GET', `/api/data-quality/rules/${admins.body.id}`)).body.params).toEqual({ column: 'email' });
  });

  it('lets viewers run and read rules but not change them', async () => {
    const rule = await createRule({ name: 'viewer check', type: 'not_null', params: { column: 'id' } });
    expect((await t.request('POST', `/api/data-quality/rules/${rule.body.id}/run`, { token: viewer })).status).toBe(200);
    expect((await t.request('POST', '/api/data-quality/rules', { token: viewer, body: { dataset_id: datasetId, name: 'x', type: 'not_null', params: { column: 'id' } } })).status).toBe(403);
    expect((await t.request('DELETE', `/api/data-quality/rules/${rule.body.id}`, { token: viewer })).status).toBe(403);
    expect((await t.request('DELETE', `/api/data-quality/rules/${rule.body.id}`)).status).toBe(204);
    expect((await t.request('GET', `/api/data-quality/rules/${rule.body.id}`)).status).toBe(404);
  });

  it('drops a dataset\u2019s rules, their runs and its cached profiles with the dataset', async () => {
    const project = await t.request('POST', '/api/projects', { body: { key: 'GONE', name: 'Gone' } });
    const doomed = await t.request('POST', '/api/datasets', { body: { name: 'doomed', project_id: project.body.id, columns: [{ name: 'v', type: 'integer' }] } });
    expect((await t.request('POST', `/api/datasets/${doomed.body.id}/rows`, { body: [{ v: 1 }, { v: null }] })).status).toBe(200);
    const rule = await t.request('POST', '/api/data-quality/rules', { body: { dataset_id: doomed.body.id, name: 'doomed check', type: 'not_null', params: { column: 'v' } } });
    expect(rule.status).toBe(201);
    expect((await t.request('POST', `/api/data-quality/rules/${rule.body.id}/run`)).body.status).toBe('failed');
    expect((await t.request('GET', `/api/statistics/datasets/${doomed.body.id}`)).status).toBe(200);
    const db = t.kernel.storage.db;
    const left = async () => ({
      rules: (await db.selectFrom('dq_rules').select('id').where('dataset_id', '=', doomed.body.id).execute()).length,
      runs: (await db.selectFrom('dq_runs').select('id').where('rule_id', '=', rule.body.id).execute()).length,
      profiles: (await db.selectFrom('dataset_profiles').select('dataset_id').where('dataset_id', '=', doomed.body.id).execute()).length,
    });
    expect(await left()).toEqual({ rules: 1, runs: 1, profiles: 1 });

    expect((await t.request('DELETE', `/api/datasets/${doomed.body.id}`)).status).toBe(204);
    // Dropped by the subscribers of the durable datasets.deleted event, once it is delivered.
    expect(await until(left, (n) => n.rules + n.runs + n.profiles === 0)).toEqual({ rules: 0, runs: 0, profiles: 0 });
    expect((await t.request('GET', `/api/data-quality/rules/${rule.body.id}`)).status).toBe(404);
    expect((await t.request('GET', '/api/data-quality/rules')).body.map((r: { id: number }) => r.id)).not.toContain(rule.body.id);
  });

  it('keeps rules and runs inside their organization', async () => {
    const rule = await createRule({ name: 'private', type: 'not_null', params: { column: 'id' } });
    const { token } = await t.outsider('dq-outsider');
    expect((await t.request('GET', '/api/data-quality/rules', { token })).body).toEqual([]);
    for (const [method, path] of [
      ['GET', `/api/data-quality/rules/${rule.body.id}`],
      ['PATCH', `/api/data-quality/rules/${rule.body.id}`],
      ['DELETE', `/api/data-quality/rules/${rule.body.id}`],
      ['POST', `/api/data-quality/rules/${rule.body.id}/run`],
      ['GET', `/api/data-quality/rules/${rule.body.id}/runs`],
      ['POST', `/api/data-quality/datasets/${datasetId}/run`],
    ] as const) {
      const body = method === 'PATCH' ? { name: 'hijack' } : undefined;
      expect((await t.request(method, path, { token, body })).status, `${method} ${path}`).toBe(404);
      expect((await t.request(method, path, { token, body, headers: { 'x-org-id': '1' } })).status, `${method} ${path}`).toBe(403);
    }
    expect((await t.request('POST', '/api/data-quality/rules', { token, body: { dataset_id: datasetId, name: 'x', type: 'not_null', params: { column: 'id' } } })).status).toBe(404);
  });

  describe('keeps a run\u2019s details in the data scope it was evaluated in (F3)', () => {
    let ordersId: number;
    /** Editors in the FR group (row policy country = FR): one without PII, one with it through a group. */
    let editor: string;
    let editorPii: string;
    const rules: Record<string, number> = {};
    /** Anything of the rows, emails and database errors the FR editor without PII may not see. */
    const HIDDEN = /ceo|secret\.test|HIDDEN|example\.test|invalid input|"DE"|"US"/;
    // Postgres: the database fails with every value in its error text once more rows than the
    // editor's two are visible (the editor's own save check passes).
    const LEAK = "case when (select count(*) from orders) < 3 then true else (select string_agg(email || '/' || note, ', ') from orders)::bool end";
    // Both: all emails are *** to the editor; to whoever sees PII the failing count answers a guess.
    const GUESS = "email = '***' or email like 'ceo%'";
    const runsAs = async (token: string | undefined, rule: number) => {
      const res = await t.request('GET', `/api/data-quality/rules/${rule}/runs`, { token });
      expect(res.status, res.text).toBe(200);
      return res;
    };

    beforeAll(async () => {
      const project = await t.request('POST', '/api/projects', { body: { key: 'SCOPED', name: 'Scoped' } });
      const dataset = await t.request('POST', '/api/datasets', {
        body: {
          name: 'orders',
          project_id: project.body.id,
          columns: [
            { name: 'id', type: 'integer' },
            { name: 'email', type: 'string', pii: true },
            { name: 'country', type: 'string' },
            { name: 'note', type: 'string' },
          ],
        },
      });
      ordersId = dataset.body.id;
      const csv = 'id,email,country,note\n1,a@example.test,FR,first\n2,ceo@secret.test,DE,HIDDEN-merger\n3,c@example.test,US,HIDDEN-layoffs\n4,ceo-fr@secret.test,FR,second\n';
      expect((await t.request('POST', `/api/datasets/${ordersId}/data`, { body: csv, headers: { 'content-type': 'text/csv' } })).status).toBe(200);
      const fr = (await t.request('POST', '/api/groups', { body: { name: 'dq-fr', capabilities: [] } })).body.id;
      const pii = (await t.request('POST', '/api/groups', { body: { name: 'dq-pii', capabilities: ['datasets.pii.read'] } })).body.id;
      expect((await t.request('POST', `/api/datasets/${ordersId}/row-policies`, { body: { group_id: fr, filters: ['country:eq:FR'] } })).status).toBe(201);
      const plain = await t.userToken('editor', 'dq-fr-editor');
      const seer = await t.userToken('editor', 'dq-fr-pii-editor');
      for (const [user, groups] of [[plain, [fr]], [seer, [fr, pii]]] as const) {
        for (const group of groups) expect((await t.request('POST', `/api/groups/${group}/members`, { body: { user_id: user.id } })).status).toBe(201);
      }
      editor = plain.token;
      editorPii = seer.token;
      const saved: [string, string, Record<string, unknown>][] = [
        ['guess', 'custom_sql', { condition: GUESS }],
        ['countries', 'allowed_values', { column: 'country', values: ['FR'] }],
        ['size', 'row_count_between', { max: 2 }],
        ...(dialect === 'postgres' ? [['leak', 'custom_sql', { condition: LEAK }] as [string, string, Record<string, unknown>]] : []),
      ];
      for (const [name, type, params] of saved) {
        const rule = await t.request('POST', '/api/data-quality/rules', { token: editor, body: { dataset_id: ordersId, name, type, params } });
        expect(rule.status, rule.text).toBe(201);
        rules[name] = rule.body.id;
      }
      // An admin (every row, PII) runs the dataset's rules; the answer is theirs, details and all.
      const report = await t.request('POST', `/api/data-quality/datasets/${ordersId}/run`);
      expect(report.status, report.text).toBe(200);
      const byRule = (id: number) => report.body.runs.find((r: { rule_id: number }) => r.rule_id === id);
      expect(byRule(rules.guess)).toMatchObject({ status: 'failed', failing_rows: 2, details_withheld: false });
      expect(byRule(rules.countries)).toMatchObject({ status: 'failed', failing_rows: 2, details_withheld: false });
      expect(byRule(rules.countries).sample.map((r: { country: string }) => r.country)).toEqual(['DE', 'US']);
      expect(byRule(rules.size)).toMatchObject({ status: 'failed', observed: 4 });
      if (dialect === 'postgres') {
        expect(byRule(rules.leak).status).toBe('error');
        expect(byRule(rules.leak).message).toContain('ceo@secret.test/HIDDEN-merger');
      }
    });

    it('shows a reader of another scope the status of a run, never its count, measure, sample, message or database error', async () => {
      for (const [name, id] of Object.entries(rules)) {
        for (const token of [editor, editorPii, viewer]) {
          const res = await runsAs(token, id);
          expect(res.text, name).not.toMatch(HIDDEN);
          expect(res.body).toHaveLength(1);
          const [run] = res.body;
          expect(run, name).toMatchObject({ rule_id: id, dataset_id: ordersId, severity: 'error', failing_rows: null, observed: null, sample: [], details_withheld: true });
          expect(run.message, name).toMatch(/^details withheld: this run was evaluated in another data scope/);
          // The pass/fail bit stays visible (a known limit).
          expect(run.status, name).toBe(name === 'leak' ? 'error' : 'failed');
          expect(typeof run.started_at).toBe('string');
          expect(typeof run.duration_ms).toBe('number');
        }
      }
      // The admin, in the scope the runs were evaluated in, still sees everything.
      const guess = (await runsAs(undefined, rules.guess)).body[0];
      expect(guess).toMatchObject({ failing_rows: 2, message: '2 rows break the condition', details_withheld: false });
      const countries = (await runsAs(undefined, rules.countries)).body[0];
      expect(countries.sample.map((r: { country: string; email: string }) => [r.country, r.email])).toEqual([
        ['DE', '***'],
        ['US', '***'],
      ]);
      expect((await runsAs(undefined, rules.size)).body[0]).toMatchObject({ observed: 4, message: '4 rows (expected -∞ … 2)' });
      if (dialect === 'postgres') expect((await runsAs(undefined, rules.leak)).body[0].message).toContain('ceo@secret.test/HIDDEN-merger');
    });

    it('shows a runner the details of their own scope only, and a reader who may not see PII no run that saw it', async () => {
      // The FR editor runs each rule: their own runs show details, of their rows only.
      for (const id of Object.values(rules)) expect((await t.request('POST', `/api/data-quality/rules/${id}/run`, { token: editor })).status).toBe(200);
      // The FR editor who sees PII runs the guess: one FR email does not start with ceo.
      const seen = await t.request('POST', `/api/data-quality/rules/${rules.guess}/run`, { token: editorPii });
      expect(seen.body).toMatchObject({ status: 'failed', failing_rows: 1, details_withheld: false });

      const guess = (await runsAs(editor, rules.guess)).body;
      expect(guess.map((r: { details_withheld: boolean }) => r.details_withheld)).toEqual([true, false, true]);
      expect(guess[0]).toMatchObject({ status: 'failed', failing_rows: null, sample: [] });
      expect(guess[1]).toMatchObject({ status: 'passed', failing_rows: 0, message: 'every row meets the condition' });
      const countries = (await runsAs(editor, rules.countries)).body;
      expect(countries[0]).toMatchObject({ status: 'passed', failing_rows: 0, sample: [], message: 'all 2 rows pass', details_withheld: false });
      expect(countries[1]).toMatchObject({ failing_rows: null, sample: [], details_withheld: true });
      expect((await runsAs(editor, rules.size)).body[0]).toMatchObject({ status: 'passed', observed: 2, details_withheld: false });
      if (dialect === 'postgres') expect((await runsAs(editor, rules.leak)).body[0]).toMatchObject({ status: 'passed', failing_rows: 0, details_withheld: false });
      for (const id of Object.values(rules)) expect((await runsAs(editor, id)).text).not.toMatch(HIDDEN);

      // The editor who sees PII reads the plain editor's run (it saw less), not the admin's.
      const seer = (await runsAs(editorPii, rules.guess)).body;
      expect(seer.map((r: { failing_rows: number | null }) => r.failing_rows)).toEqual([1, 0, null]);
      // Other scopes see none of the FR editors' details: the admin (every row), a viewer in no group.
      for (const token of [undefined, viewer]) {
        expect((await runsAs(token, rules.guess)).body.slice(0, 2).map((r: { failing_rows: number | null }) => r.failing_rows)).toEqual([null, null]);
      }
    });

    it('withholds the details of runs kept before scopes were recorded from all but readers who see every row and PII', async () => {
      const db = t.kernel.storage.db;
      const oldest = await db.selectFrom('dq_runs').select('id').where('rule_id', '=', rules.countries).orderBy('id', 'asc').executeTakeFirstOrThrow();
      await db.updateTable('dq_runs').set({ scope_key: null, saw_pii: null }).where('id', '=', oldest.id).execute();
      const legacy = async (token?: string) => (await runsAs(token, rules.countries)).body.find((r: { id: number }) => r.id === oldest.id);
      expect(await legacy()).toMatchObject({ failing_rows: 2, details_withheld: false });
      for (const token of [editor, editorPii, viewer]) expect(await legacy(token)).toMatchObject({ status: 'failed', failing_rows: null, sample: [], details_withheld: true });
    });
  });
});
