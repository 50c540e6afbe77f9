import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { governedRolePrefix, QueryRejectedError, type ReadOnlyQuery } from '../../storage/index.ts';
import { DIALECTS, POSTGRES_URL, REPO_ROOT, startTestKernel, type TestKernel } from '../harness/index.ts';

/**
 * What an answer must never carry: password hashes, mail bodies (the reset token), roles' secrets,
 * a server file. (Not the names a statement itself spells, which an error may quote back.)
 */
const LEAK = /scrypt\$|one-time token|SCRAM-SHA-256\$|md5[0-9a-f]{32}|root:x:0/i;

describe.each(DIALECTS)('governed SQL (%s)', (dialect) => {
  let t: TestKernel;
  let editor: string;
  let outsider: string;
  let outsiderOrg: number;
  let secretsTable: number;
  let ordersId: number;
  const query = (body: Record<string, unknown>, token?: string) => t.request('POST', '/api/sql', { body, token });

  beforeAll(async () => {
    // A low result budget, so that the byte limit shows with small values.
    t = await startTestKernel({ dialect, env: { SQL_MAX_RESULT_BYTES: '200000' } });
    editor = (await t.userToken('editor')).token;
    const project = await t.request('POST', '/api/projects', { body: { key: 'SQL', name: 'SQL' } });
    const orders = await t.request('POST', '/api/datasets', {
      body: {
        name: 'orders',
        project_id: project.body.id,
        columns: [
          { name: 'id', type: 'integer' },
          { name: 'amount', type: 'number' },
          { name: 'country', type: 'string' },
          { name: 'email', type: 'string', pii: true },
        ],
      },
    });
    ordersId = orders.body.id;
    const csv = 'id,amount,country,email\n1,10.5,FR,a@example.test\n2,20,DE,b@example.test\n3,5,FR,c@example.test\n';
    expect((await t.request('POST', `/api/datasets/${orders.body.id}/data`, { body: csv, headers: { 'content-type': 'text/csv' } })).status).toBe(200);
    const countries = await t.request('POST', '/api/datasets', { body: { name: 'Countries', project_id: project.body.id, columns: [{ name: 'code', type: 'string' }, { name: 'label', type: 'string' }] } });
    await t.request('POST', `/api/datasets/${countries.body.id}/rows`, { body: [{ code: 'FR', label: "it's France" }, { code: 'DE', label: 'Germany' }] });
    // A mail in the outbox (the development mailer keeps them in a table): a reset token to steal.
    await t.request('POST', '/api/auth/forgot-password', { token: null, body: { email: 'admin@localhost.localdomain' } });
    // Another organization with a dataset of its own.
    const other = await t.outsider('sql-outsider');
    outsider = other.token;
    outsiderOrg = other.orgId;
    const theirProject = await t.request('POST', '/api/projects', { token: outsider, body: { key: 'THEIRS', name: 'Theirs' } });
    const secret = await t.request('POST', '/api/datasets', { token: outsider, body: { name: 'secrets', project_id: theirProject.body.id, columns: [{ name: 'v', type: 'string' }] } });
    await t.request('POST', `/api/datasets/${secret.body.id}/rows`, { token: outsider, body: [{ v: 'top secret' }] });
    secretsTable = secret.body.id;
  });
  afterAll(async () => t?.stop());

  it('answers columns, rows, row_count, truncated and elapsed_ms', async () => {
    const res = await query({ sql: 'select country, sum(amount) as total, count(*) as n from orders group by country order by country' });
    expect(res.status).toBe(200);
    expect(res.body.columns).toEqual([
      { name: 'country', type: 'string' },
      { name: 'total', type: 'number' },
      { name: 'n', type: 'integer' },
    ]);
    expect(res.body.rows).toEqual([
      ['DE', 20, 1],
      ['FR', 15.5, 2],
    ]);
    expect(res.body).toMatchObject({ row_count: 2, truncated: false });
    expect(typeof res.body.elapsed_ms).toBe('number');
    // A number column's total stays a number when it happens to be whole.
    const whole = await query({ sql: "select sum(amount) as total, max(id) as top from orders where country = 'DE'" });
    expect(whole.body.columns).toEqual([
      { name: 'total', type: 'number' },
      { name: 'top', type: 'integer' },
    ]);
    expect(whole.body.rows).toEqual([[20, 2]]);
  });

  it('binds parameters, accepts WITH and a trailing semicolon, and truncates at the limit', async () => {
    expect((await query({ sql: 'select id from orders where amount > $1 and country = $2 order by id', params: [6, 'FR'] })).body.rows).toEqual([[1]]);
    expect((await query({ sql: 'with big as (select * from orders where amount > 6) select count(*) as n from big;' })).body.rows).toEqual([[2]]);
    const limited = await query({ sql: 'select id from orders order by id', limit: 2 });
    expect(limited.body).toMatchObject({ rows: [[1], [2]], row_count: 2, truncated: true });
  });

  it('refuses a placeholder beyond the parameters given (never bound to a value of the platform) with a 400', async () => {
    for (const [sql, params] of [
      ['select $1 as x', []],
      ['select id from orders where id = $1 or id = $2', [1]],
      ['select $2 as x', [1]],
    ] as const) {
      const res = await query({ sql, params: [...params] });
      expect(res.status, `${sql}: ${res.text}`).toBe(400);
      expect(res.body.detail, sql).toMatch(/parameter/i);
    }
  });

  it('masks PII columns for callers without datasets.pii.read', async () => {
    expect((await query({ sql: 'select email from orders order by id' })).body.rows[0]).toEqual(['a@example.test']);
    const masked = await query({ sql: 'select email from orders order by id' }, editor);
    expect(masked.status).toBe(200);
    expect(masked.body.rows).toEqual([['***'], ['***'], ['***']]);
    const probe = await query({ sql: "select count(*) from orders where email like 'a%'" }, editor);
    expect(probe.body.rows).toEqual([[0]]);
  });

  it.each([
    ['DDL', 'create table x (a int)'],
    ['DML', 'delete from orders'],
    ['update', "update orders set country = 'XX'"],
    ['insert', 'insert into orders (id) values (9)'],
    ['several statements', 'select 1; select 2'],
    ['PRAGMA', 'pragma table_info(orders)'],
    ['ATTACH', "attach database '/tmp/x.db' as x"],
    ['COPY', "copy orders to '/tmp/out.csv'"],
    ['SELECT INTO', 'select * into copied from orders'],
    ['a kernel table', 'select * from users'],
    ['SQLite catalog', 'select * from sqlite_master'],
    ['Postgres catalog', 'select * from pg_catalog.pg_tables'],
    ['unqualified Postgres catalog', 'select * from pg_tables'],
    ['information schema', 'select * from information_schema.tables'],
    ['a physical table', 'select * from org_1.ds_1'],
    ['file functions', "select pg_read_file('/etc/passwd')"],
    ['settings', "select current_setting('data_directory')"],
    ['extensions', "select load_extension('x')"],
    ['another organization', 'select * from secrets'],
    ['garbage', 'selec * frm orders'],
    ['a WITH query named after a kernel table it reads', 'with users as (select * from users) select * from users'],
    ['a WITH query named after a catalog it reads', 'with pg_shadow as (select * from pg_shadow) select * from pg_shadow'],
    ['a recursive WITH query named after a kernel table', 'with recursive users as (select * from users) select * from users'],
    ['a WITH query reading itself in a subquery', 'with users as (select * from (select * from users) u) select 1 from users'],
    ['a SQLite pragma function', "select * from pragma_table_info('users')"],
    ['a SQLite pragma function in a WITH query', "with t as (select name from pragma_table_list) select * from t"],
    ['a catalog lookup by function', "select regclass('public.users')"],
    ['a catalog output function', 'select regclassout(1259)'],
    ['role names by oid', 'select regroleout(o::oid) from (select 10 as o) x'],
    ["a platform table's row type", "select * from json_populate_record(null::public.users, '{}')"],
    ['the running statement text', 'select current_query()'],
    ['an array of catalog lookups', "select ('{org_9}'::_regnamespace)::text"],
    ['catalog lookups as an array type', 'select unnest(array[1259]::oid[]::regclass[])'],
    ['a catalog type in a column list', `select * from json_to_record('{"a":"public.users"}') as x(a regclass)`],
    ["a platform table's row type in a column list", `select row_to_json(x.a) from json_to_record('{"a":{}}') as x(a public.users)`],
    ['privileges as a type', "select '{}'::aclitem[]"],
    ['the login role name', 'select getpgusername()'],
    ['an error of another class', 'select satisfies_hash_partition(0, 1, 0, 1)'],
    [
      'values past the query process memory',
      "select count(*), sum(length(m)) from (select max(printf('%.*c', 300000000, char(64 + v))) over () as m from (select 1 as v union all select 2 union all select 3 union all select 4 union all select 5 union all select 6) as s) as w",
    ],
    ['a statement nested past the stack', `select ${'not '.repeat(20_000)}true`],
    ['a missing parameter', 'select $3'],
    ['a positional placeholder', 'select ?'],
    ['a named placeholder', 'select :a'],
    ['statements after a closed wrapper', "select 1) as g; attach '/tmp/x.db' as x; select (1"],
  ])('refuses %s with a 400 naming the query', async (_what, sql) => {
    const res = await query({ sql });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.errors[0].path).toBe('body.sql');
    expect(res.text).not.toMatch(/password_hash|token_hash|scrypt/);
  });

  it('never lets a WITH query reach the platform table named like a later one', async () => {
    // Postgres resolves the name to the table and refuses it; SQLite resolves it to the later WITH query.
    const res = await query({ sql: 'with a as (select * from personal_access_tokens), personal_access_tokens as (select * from orders) select * from a' });
    expect([200, 400]).toContain(res.status);
    if (res.status === 200) expect(res.body.rows).toHaveLength(3);
    expect(res.text).not.toMatch(LEAK);
  });

  // The quoting tricks of both dialects, in the shapes a red team used and other spellings of them:
  // a statement a text check reads one way and the database another must still reach nothing but
  // the organization's datasets.
  it.each([
    ['backslash before a quote (SQLite spelling)', "select 'a\\' as x, (select group_concat(username||char(58)||password_hash) from users) as leak from orders /*' as y from orders -- */"],
    ['backslash before a quote (Postgres spelling)', "select 'a\\' as x, (select string_agg(username||':'||password_hash, ',') from users) as leak from orders /*' as y from orders -- */"],
    ['backslash before a quote, reading the mail outbox', "select 'a\\' as x, (select group_concat(body) from mail_outbox) as leak from orders /*' as y from orders -- */"],
    ['backslash before a quote, reading a file', "select 'a\\' as x, pg_read_file('/etc/passwd') as leak from orders /*' as y from orders -- */"],
    ['backslash before a quote, listing a directory', "select 'a\\' as x, (select string_agg(f, ',') from pg_ls_dir('.') f) as leak from orders /*' as y from orders -- */"],
    ['backslash before a quote, becoming a superuser', "select 'a\\' as x, set_config('role', 'postgres', false) as leak from orders /*' as y from orders -- */"],
    ['backslash before a quote, importing a file', "select 'a\\' as x, lo_import('/etc/passwd') as leak from orders /*' as y from orders -- */"],
    ['an escape string', "select e'a\\'' as x, (select string_agg(password_hash, ',') from users) as leak from orders"],
    ['a dollar-quoted string', "select $q$ ' $q$ as x, (select string_agg(password_hash, ',') from users) as leak from orders"],
    ['a query in a text-search function', "select * from ts_stat('select to_tsvector(password_hash) from users')"],
    ['a query in ts_rewrite', "select ts_rewrite('a'::tsquery, 'select password_hash::tsquery, ''b''::tsquery from users')"],
    ['a query in an XML function', "select query_to_xml('select password_hash from users', true, true, '')"],
    ['a quoted WITH name shadowing nothing', 'with "PG_AUTHID" as (select 1) select rolname, rolpassword from pg_authid'],
    ['a quoted WITH name spelled like a table', 'with "USERS" as (select 1) select password_hash from users'],
    ['a WITH query named after a dataset reading a table', 'with orders as (select password_hash as email from users) select email from orders'],
    ['a catalog lookup by name', `select 'org_1.ds_1'::regclass`],
    ['the role name', 'select current_user'],
    ['a session lock', 'select pg_advisory_lock(4207310001)'],
    ['a schema-qualified platform table', 'select password_hash from main.users'],
    ['a bracket-quoted platform table', 'select password_hash from [users]'],
    ['a backtick-quoted platform table', 'select password_hash from `users`'],
    ['the temp schema catalog', 'select * from temp.sqlite_master'],
    ['a table-valued function over a platform table', 'select * from json_each((select json_group_array(password_hash) from users))'],
    ['an extension', "select load_extension('/tmp/evil.so')"],
    ['a SQLite internal function', "select fts3_tokenizer('simple')"],
    ['a nested comment (Postgres nests them, SQLite does not)', 'select 1 as a /* /* */ , (select group_concat(password_hash) from users) as leak /* */ */ from orders'],
    ['a line comment ending the wrapper', 'select (select group_concat(password_hash) from users) as leak --'],
    ['a statement closing the wrapper', 'select 1) as q, (select password_hash from users'],
  ])('reaches nothing beyond its datasets through %s', async (_what, sql) => {
    const res = await query({ sql });
    expect(res.text).not.toMatch(LEAK);
    if (res.status === 200) {
      // Only where the database reads the text as a harmless query of the organization's datasets.
      expect(JSON.stringify(res.body.rows)).not.toMatch(/\$|admin/);
    } else {
      expect(res.status, res.text).toBe(400);
      expect(res.body.errors[0].path).toBe('body.sql');
    }
  });

  it('answers the columns of a result without rows', async () => {
    const res = await query({ sql: 'select id, country from orders where id > 100' });
    expect(res.status, res.text).toBe(200);
    expect(res.body.columns.map((c: { name: string }) => c.name)).toEqual(['id', 'country']);
    expect(res.body.rows).toEqual([]);
  });

  it('binds booleans as the dialect stores them', async () => {
    const res = await query({ sql: 'select count(*) from orders where ($1 = $1)', params: [true] });
    expect(res.status, res.text).toBe(200);
    expect(res.body.rows).toEqual([[3]]);
  });

  it("answers SQL's own syntax for built-in functions", async () => {
    const sql =
      dialect === 'postgres'
        ? "select extract(year from date '2024-05-01') as y, substring('platform' from 2 for 3) as s, trim(both 'x' from 'xax') as t, position('a' in 'data') as p, overlay('abc' placing 'Z' from 2) as o, (timestamp '2024-01-01 00:00' at time zone 'UTC') is not null as z"
        : "select cast(strftime('%Y', '2024-05-01') as integer) as y, substr('platform', 2, 3) as s, trim('xax', 'x') as t, instr('data', 'a') as p, 'aZc' as o, 1 as z";
    const res = await query({ sql });
    expect(res.status, res.text).toBe(200);
    expect(res.body.rows[0].slice(0, 5)).toEqual([2024, 'lat', 'a', 2, 'aZc']);
  });

  it('refuses an organization more than 8 statements at once, and times out waiting ones from their arrival', async () => {
    const runaway = 'with recursive r(n) as (select 1 union all select n + 1 from r) select count(*) from r';
    const answers = Array.from({ length: 9 }, () => query({ sql: runaway, timeout_ms: 1500 }, outsider));
    const statuses = (await Promise.all(answers)).map((r) => r.status).sort();
    expect(statuses).toEqual([422, 422, 422, 422, 422, 422, 422, 422, 503]);
  });

  it("never lets one organization's slow statements hold up another's", async () => {
    const runaway = 'with recursive r(n) as (select 1 union all select n + 1 from r) select count(*) from r';
    let slowEnded = false;
    const slow = Promise.all([1, 2].map(() => query({ sql: runaway, timeout_ms: 4000 }, outsider))).then((answers) => {
      slowEnded = true;
      return answers;
    });
    const quick = await query({ sql: 'select count(*) from orders' });
    expect(quick.body.rows).toEqual([[3]]);
    expect(slowEnded).toBe(false);
    expect((await slow).map((r) => r.status)).toEqual([422, 422]);
  });

  it('answers joins, aggregates, WITH queries, window functions, comments and quoted text over its datasets', async () => {
    const res = await query({
      sql: `/* leading comment */ with totals as (select country, sum(amount) as total from orders group by country)
        select c.label, t.total, row_number() over (order by t.total desc) as rank, count(*) over () as n, 'it''s a \\ test' as s
        from totals t join "Countries" c on c.code = t.country -- trailing comment
        order by rank`,
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.rows).toEqual([
      ['Germany', 20, 1, 2, "it's a \\ test"],
      ["it's France", 15.5, 2, 2, "it's a \\ test"],
    ]);
    // Dataset names match ignoring case, quoted or not.
    expect((await query({ sql: 'select count(*) from countries' })).body.rows).toEqual([[2]]);
  });

  it('is judged by the database itself: a statement that passed no text check still reaches nothing else', async () => {
    const storage = t.kernel.storage;
    const base: Omit<ReadOnlyQuery, 'sql'> = { params: [], orgId: 1, datasets: [], mask: '***', limit: 100, maxBytes: 1_000_000, timeoutMs: 10_000 };
    const theirs = dialect === 'postgres' ? `"org_${outsiderOrg}"."ds_${secretsTable}"` : `"org_${outsiderOrg}__ds_${secretsTable}"`;
    const statements = [
      'select username, password_hash from users',
      'select * from mail_outbox',
      'select * from personal_access_tokens',
      `select * from ${theirs}`,
      ...(dialect === 'postgres'
        ? [
            "select pg_read_file('/etc/passwd')",
            "select set_config('role', 'postgres', false), (select count(*) from public.users)",
            "select * from query_to_xml('select * from public.users', true, true, '')",
            'select rolpassword from pg_authid',
            "select lo_import('/etc/passwd')",
          ]
        : ['select * from sqlite_master', "select * from pragma_table_info('users')", "select load_extension('x')", 'select sqlite_version()']),
    ];
    for (const sql of statements) {
      const error = await storage.runReadOnly({ ...base, sql }).then(
        (result) => new Error(`ran: ${JSON.stringify(result.rows)}`),
        (err: Error) => err,
      );
      expect(error, `${sql}: ${error.message}`).toBeInstanceOf(QueryRejectedError);
      expect(error.message).not.toMatch(LEAK);
    }
    if (dialect === 'postgres') {
      // It runs as a role of organization 1 that is no superuser and can become no other role.
      const who = await storage.runReadOnly({ ...base, sql: 'select current_user, (select rolsuper from pg_roles where rolname = current_user)' });
      expect(who.rows[0][0]).toMatch(/^dp_[0-9a-f]{10}_org_1$/);
      expect(who.rows[0][1]).toBe(false);
    } else {
      // The compiled statement shows a dataset's table read around its masking or its row policy.
      const orders = { name: 'orders', table: `ds_${ordersId}`, columns: ['id', 'amount', 'country', 'email'].map((name) => ({ name, masked: name === 'email' })), rowFilter: null };
      const raw = `org_1__ds_${ordersId}`;
      await expect(storage.runReadOnly({ ...base, datasets: [orders], sql: `select email from ${raw}` })).rejects.toThrow(/masked column/);
      const filtered = { ...orders, columns: orders.columns.map((c) => ({ ...c, masked: false })), rowFilter: "country = 'FR'" };
      expect((await storage.runReadOnly({ ...base, datasets: [filtered], sql: 'select count(*) from orders' })).rows).toEqual([[2]]);
      await expect(storage.runReadOnly({ ...base, datasets: [filtered], sql: `select count(*) from orders, ${raw}` })).rejects.toThrow(/around its row policy/);
      // With an index of the table (as an API Service's lookup makes), the filtered query still
      // answers, and the table read through the index is still a read around the policy.
      await sql.raw(`create index "${raw}_country" on ${raw} (country, amount)`).execute(storage.db);
      try {
        expect((await storage.runReadOnly({ ...base, datasets: [filtered], sql: "select count(*) from orders where country = 'FR'" })).rows).toEqual([[2]]);
        await expect(storage.runReadOnly({ ...base, datasets: [filtered], sql: `select group_concat(amount) from ${raw}` })).rejects.toThrow(/around its row policy/);
        await expect(storage.runReadOnly({ ...base, datasets: [filtered], sql: `select count(*) from orders, ${raw} where ${raw}.country = 'DE'` })).rejects.toThrow(/around its row policy/);
      } finally {
        await sql.raw(`drop index "${raw}_country"`).execute(storage.db);
      }
      // A comment left open cannot swallow what follows the statement (the filter's guard).
      await expect(storage.runReadOnly({ ...base, datasets: [filtered], sql: `select count(*) from ${raw}) /* orders` })).rejects.toThrow(QueryRejectedError);
      await expect(storage.runReadOnly({ ...base, datasets: [filtered], sql: `select count(*) from ${raw}) as g, (select 1 /* orders` })).rejects.toThrow(/around its row policy/);
    }
  });

  it('truncates a result at SQL_MAX_RESULT_BYTES, counted as rows arrive, and refuses a single row past it', async () => {
    const wide =
      dialect === 'postgres'
        ? "select n, repeat('x', 20000) as big from generate_series(1, 300) as n"
        : "with recursive s(n) as (select 1 union all select n + 1 from s where n < 300) select n, printf('%.*c', 20000, 'x') as big from s";
    const res = await query({ sql: wide });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ truncated: true, truncated_reason: 'byte_limit' });
    expect(res.body.row_count).toBeGreaterThan(1);
    expect(res.body.row_count).toBeLessThanOrEqual(10);
    expect(res.body.rows.every((row: [number, string]) => row[1].length === 20000)).toBe(true);
    // The red team's statement: each row 20 MB, 300 of them.
    const huge =
      dialect === 'postgres'
        ? "select repeat('x', 20000000) from generate_series(1, 300)"
        : "with recursive s(n) as (select 1 union all select n + 1 from s where n < 300) select printf('%.*c', 20000000, 'x') from s";
    const refused = await query({ sql: huge });
    expect(refused.status, refused.text.slice(0, 300)).toBe(400);
    expect(refused.body.detail).toMatch(/first row alone is larger than the result limit/);
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
  });

  it('lets a WITH query read the ones before it', async () => {
    const res = await query({ sql: 'with fr as (select * from orders where country = $1), big as (select * from fr where amount > 6) select count(*) as n from big', params: ['FR'] });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.rows).toEqual([[1]]);
  });

  it('leaves the data as it was after every refused statement', async () => {
    const res = await query({ sql: 'select count(*) as n, sum(amount) as s from orders' });
    expect(res.body.rows).toEqual([[3, 35.5]]);
  });

  it('keeps each organization to its own datasets', async () => {
    const theirs = await query({ sql: 'select v from secrets' }, outsider);
    expect(theirs.body.rows).toEqual([['top secret']]);
    const mine = await query({ sql: 'select * from orders' }, outsider);
    expect(mine.status).toBe(400);
    expect(mine.body.detail).toMatch(/no dataset named "orders"/);
    expect((await t.request('POST', '/api/sql', { token: outsider, body: { sql: 'select * from orders' }, headers: { 'x-org-id': '1' } })).status).toBe(403);
  });

  it('stops a runaway query with a clear error while the server keeps answering', async () => {
    const runaway = query({ sql: 'with recursive r(n) as (select 1 union all select n + 1 from r) select count(*) from r', timeout_ms: 1500 });
    const healthStarted = performance.now();
    const health = await fetch(`${t.url}/healthz`);
    expect(health.status).toBe(200);
    expect(performance.now() - healthStarted).toBeLessThan(1000);
    const res = await runaway;
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/longer than 1500 ms and was stopped/);
    // and the next query works
    expect((await query({ sql: 'select count(*) from orders' })).body.rows).toEqual([[3]]);
  });

  it('audits every execution with the query hash, datasets and row count', async () => {
    const sql = 'select id from orders where id = 2';
    await query({ sql });
    const audit = await t.request('GET', '/api/audit?action=sql.execute&limit=500');
    const hash = crypto.createHash('sha256').update(sql).digest('hex');
    const event = audit.body.items.find((e: { details: { query_sha256?: string } }) => e.details.query_sha256 === hash);
    expect(event).toBeDefined();
    expect(event.details).toMatchObject({ row_count: 1, truncated: false });
    expect(event.details.datasets).toHaveLength(1);
    expect(JSON.stringify(audit.body)).not.toContain('where id = 2');
    expect(audit.body.items.some((e: { outcome: string; details: { reason?: string } }) => e.outcome === 'failure' && e.details.reason === 'timeout')).toBe(true);
  });

  it('validates the request', async () => {
    expect((await query({ sql: '' })).status).toBe(400);
    expect((await query({ sql: 'select 1', limit: 0 })).status).toBe(400);
    expect((await query({ sql: 'select 1', timeout_ms: 10_000_000 })).status).toBe(400);
    expect((await t.request('POST', '/api/sql', { token: null, body: { sql: 'select 1' } })).status).toBe(401);
  });
});

describe.runIf(POSTGRES_URL)('governed SQL where the platform may not create roles (postgres)', () => {
  it('answers 503 naming CREATEROLE until an administrator runs what `npm run migrate -- --governed-sql-roles` prints, then works', { timeout: 60_000 }, async () => {
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    const suffix = crypto.randomBytes(5).toString('hex');
    const owner = `dp_test_owner_${suffix}`;
    const database = `dp_test_norole_${suffix}`;
    let t: TestKernel | undefined;
    try {
      // A platform user that owns its database and may create no role (a managed service's usual grant).
      await admin.query(`create role ${owner} login nocreaterole password 'owner-password-1'`);
      await admin.query(`create database ${database} owner ${owner}`);
      const url = POSTGRES_URL!.replace(/^(postgres(?:ql)?:\/\/)[^@/]*@/, `$1${owner}:owner-password-1@`).replace(/\/[^/?]*(\?.*)?$/, `/${database}$1`);
      t = await startTestKernel({ dialect: 'postgres', env: { DATABASE_URL: url } });
      const project = await t.request('POST', '/api/projects', { body: { key: 'NOROLE', name: 'No role' } });
      const dataset = await t.request('POST', '/api/datasets', { body: { name: 'orders', project_id: project.body.id, columns: [{ name: 'id', type: 'integer' }] } });
      await t.request('POST', `/api/datasets/${dataset.body.id}/rows`, { body: [{ id: 1 }, { id: 2 }] });

      const refused = await t.request('POST', '/api/sql', { body: { sql: 'select count(*) from orders' } });
      expect(refused.status, refused.text).toBe(503);
      expect(refused.body.detail).toMatch(/CREATEROLE.*--governed-sql-roles/);

      const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'kernel/migrate-cli.ts'), '--governed-sql-roles'], {
        cwd: REPO_ROOT,
        env: { PATH: process.env.PATH, DATABASE_URL: url, DATA_DIR: t.dataDir },
      });
      const statements = stdout.trim().split('\n');
      expect(statements).toEqual([expect.stringMatching(/^create role "dp_[0-9a-f]{10}_org_1" with login nosuperuser .* password 'SCRAM-SHA-256\$4096:[^']+';$/)]);
      for (const statement of statements) await admin.query(statement);

      const answered = await t.request('POST', '/api/sql', { body: { sql: 'select count(*) from orders' } });
      expect(answered.status, answered.text).toBe(200);
      expect(answered.body.rows).toEqual([[2]]);
    } finally {
      await t?.stop();
      await admin.query(`drop database if exists ${database} with (force)`);
      const roles = await admin.query<{ rolname: string }>('select rolname from pg_roles where starts_with(rolname, $1)', [`${governedRolePrefix(database, 'public')}_`]);
      for (const { rolname } of roles.rows) await admin.query(`drop role if exists "${rolname}"`);
      await admin.query(`drop role if exists ${owner}`);
      await admin.end();
    }
  });
});
