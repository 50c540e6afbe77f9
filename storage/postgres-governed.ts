import crypto from 'node:crypto';
import pg from 'pg';
import { parse as parseConnectionString } from 'pg-connection-string';
import { quoteIdentifier, type DataColumn, type DataColumnType } from './data-tables.ts';
import { namespaceLockKey, POSTGRES_TYPES } from './data-tables-postgres.ts';
import { OrganizationSlots } from './organization-slots.ts';
import { cancelStatement, isPostgresConnectionLost, superviseConnections } from './postgres-connections.ts';
import {
  abortReason,
  asSubquery,
  datasetQueries,
  GovernedSqlUnavailableError,
  QueryRejectedError,
  QueryTimeoutError,
  refuseNul,
  type GovernedDescribe,
  type GovernedWrite,
  type ReadOnlyQuery,
  type ReadOnlyResult,
} from './read-only-query.ts';

/** Postgres type ids → the platform's column types; any other type reads as text (`string`). */
export const POSTGRES_COLUMN_TYPES: Readonly<Record<number, DataColumnType>> = {
  16: 'boolean',
  20: 'integer',
  21: 'integer',
  23: 'integer',
  700: 'number',
  701: 'number',
  1700: 'number',
  1082: 'date',
  1114: 'timestamp',
  1184: 'timestamp',
  114: 'json',
  3802: 'json',
};

const NUMERIC = 1700;
/** SQLSTATE of the byte-limit check below (class 54: program limit exceeded). */
const RESULT_BYTES_EXCEEDED = '54DP1';
const BYTES_FUNCTION = 'governed_result_bytes';

/**
 * A statement naming more placeholders than it was given parameters: Postgres refuses its Bind with
 * a protocol violation (08P01, a connection exception's class), yet the session goes on.
 */
function parameterShortfall(err: unknown): { given: number; required: number } | null {
  const { code, message } = err as { code?: unknown; message?: unknown };
  const counts = code === '08P01' && typeof message === 'string' ? /^bind message supplies (\d+) parameters?, but prepared statement "" requires (\d+)$/.exec(message) : null;
  return counts ? { given: Number(counts[1]), required: Number(counts[2]) } : null;
}

/** A platform-set count written into a statement: a non-negative safe integer, or a programming error. */
function integerLiteral(value: number): string {
  if (!Number.isSafeInteger(value) || value < 0) throw new TypeError(`expected a non-negative integer, got ${value}`);
  return String(value);
}
/** Organizations whose connection pools are kept open at once; the least recently used is closed past it. */
const MAX_POOLS = 16;
const CONNECTIONS_PER_ORGANIZATION = 2;
/** Statements of one organization that may wait for a connection; past them a new one is refused. */
const QUEUED_PER_ORGANIZATION = 6;

/**
 * A SCRAM-SHA-256 verifier of `password` (RFC 5802, as Postgres stores it): the role's password is
 * set from it, so the password itself never travels in a statement a server log could keep.
 */
export function scramVerifier(password: string, iterations = 4096): string {
  const salt = crypto.randomBytes(16);
  const salted = crypto.pbkdf2Sync(password.normalize('NFKC'), salt, iterations, 32, 'sha256');
  const hmac = (key: Buffer, text: string) => crypto.createHmac('sha256', key).update(text).digest();
  const storedKey = crypto.createHash('sha256').update(hmac(salted, 'Client Key')).digest();
  const serverKey = hmac(salted, 'Server Key');
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/** The prefix of the governed roles of one platform database (roles are shared by a whole Postgres cluster). */
export function governedRolePrefix(database: string, schema: string): string {
  return `dp_${crypto.createHash('sha256').update(`${database}\0${schema}`).digest('hex').slice(0, 10)}`;
}

interface GovernedPool {
  pool: pg.Pool;
  cancelRunning(): Promise<void>;
}

interface Setup {
  prefix: string;
  /** The platform's own schema, quoted. */
  schema: string;
  /** The platform's user may create roles (CREATEROLE); otherwise an administrator creates them. */
  managesRoles: boolean;
}

/**
 * Governed SQL on Postgres runs as a login role of the statement's organization, never as the
 * platform's user: the role may read that organization's dataset tables (USAGE on its schema,
 * SELECT on its tables, now and later) and nothing else the platform keeps, and being no member of
 * any other role, it cannot become one (`set role`, `set_config('role', …)`). The platform creates
 * and grants these roles (it needs CREATEROLE) and connects as them with a password derived from
 * the vault key, so every instance sharing the database derives the same one.
 */
export class PostgresGovernedRunner {
  private setup: Promise<Setup> | null = null;
  private readonly roles = new Map<number, Promise<string>>();
  private readonly pools = new Map<number, GovernedPool>();
  /** Pools evicted from `pools` that still finish a statement: stopped at shutdown too. */
  private readonly retired = new Set<GovernedPool>();
  private readonly slots = new OrganizationSlots(CONNECTIONS_PER_ORGANIZATION, QUEUED_PER_ORGANIZATION);
  private closed = false;
  /** Set once shutdown stops the running statements: a cancelled one is no timeout. */
  private stopping = false;
  /** The platform's parsers, and NUMERIC as a JSON number like every column typed `number` (beyond a double's 15–17 digits it rounds). */
  private readonly resultTypes: pg.CustomTypesConfig;

  constructor(
    private readonly platform: pg.Pool,
    private readonly connectionString: string,
    private readonly roleKey: string | undefined,
    types: pg.CustomTypesConfig,
  ) {
    this.resultTypes = {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') => (oid === NUMERIC ? Number : types.getTypeParser(oid, format as 'text'))) as pg.CustomTypesConfig['getTypeParser'],
    };
  }

  async run(query: ReadOnlyQuery): Promise<ReadOnlyResult> {
    return this.session(query, 'read only', (client, { schema, organization }) => {
      // The database counts the bytes of each row as text before sending it and stops at the
      // budget, so no more than about `maxBytes` ever reaches this process, however wide a row.
      // The budget is written in, not bound: a parameter after the caller's would answer a
      // placeholder the caller's SQL names beyond its own parameters.
      const bytes = `${schema}.${BYTES_FUNCTION}(sum(octet_length(row(governed_query.*)::text)) over (rows unbounded preceding), ${integerLiteral(query.maxBytes)})`;
      const text = `${datasetQueries(query, (table) => `${organization}.${quoteIdentifier(table)}`, (type) => POSTGRES_TYPES[type])}select governed_query.*, ${bytes} from ${asSubquery(query.sql)} limit ${integerLiteral(query.limit + 1)}`;
      return this.collect(client, text, query.params, query.limit);
    });
  }

  /**
   * The statement's result inserted into the target by the organization's role, which may insert
   * into that table alone (granted here, by the platform's user that created it). Result columns
   * are taken by position (named c1, c2, … whatever the statement calls them) and cast to the
   * target's column types. A signal that aborts cancels the running statement.
   */
  async write(write: GovernedWrite): Promise<{ rows: number }> {
    const { signal } = write;
    if (signal?.aborted) throw abortReason(signal);
    refuseNul(write.sql);
    const target = `${quoteIdentifier(`org_${write.orgId}`)}.${quoteIdentifier(write.target)}`;
    try {
      return await this.session(
        write,
        'read write',
        async (client, { organization }) => {
          const cancel = () => void cancelStatement(client);
          signal?.addEventListener('abort', cancel, { once: true });
          try {
            // Aborted while it waited for its turn or its connection.
            if (signal?.aborted) throw abortReason(signal);
            const width = (await this.describeOn(client, write, organization)).length;
            if (width !== write.columns.length) throw new QueryRejectedError(`the query returns ${width} columns, the target table has ${write.columns.length}`);
            const positions = write.columns.map((_, i) => `c${i + 1}`);
            const casts = write.columns.map((c, i) => `cast(q.${positions[i]} as ${POSTGRES_TYPES[c.type]})`);
            const text = `insert into ${target} (${write.columns.map((c) => quoteIdentifier(c.name)).join(', ')}) select ${casts.join(', ')} from (${this.governedSelect(write, organization)}) as q(${positions.join(', ')})`;
            const { rowCount } = await client.query({ text, values: write.params, queryMode: 'extended' });
            // Aborted once the insert ended: the caller gave up on it, so it is not committed.
            if (signal?.aborted) throw abortReason(signal);
            return { rows: rowCount ?? 0 };
          } finally {
            signal?.removeEventListener('abort', cancel);
          }
        },
        async (platform, role) => {
          // Under the namespace lock: another instance's role setup granting on every table of the
          // schema would update this table's privileges at once ("tuple concurrently updated").
          await platform.query('select pg_advisory_xact_lock(hashtext($1))', [namespaceLockKey(write.orgId)]);
          await platform.query(`grant insert on ${target} to ${quoteIdentifier(role)}`);
        },
      );
    } catch (err) {
      // The cancel's error (57014) is no timeout: the caller stopped it.
      throw signal?.aborted ? abortReason(signal) : err;
    }
  }

  /** The statement's result columns and their types, from the database's description of it (nothing is read). */
  async describe(query: GovernedDescribe): Promise<DataColumn[]> {
    refuseNul(query.sql);
    return this.session(query, 'read only', async (client, { organization }) =>
      (await this.describeOn(client, query, organization)).map((f) => ({ name: f.name, type: POSTGRES_COLUMN_TYPES[f.dataTypeID] ?? 'string' })),
    );
  }

  /** The statement with its datasets' queries before it, as one SELECT of every result column. */
  private governedSelect(query: GovernedDescribe, organization: string): string {
    return `${datasetQueries(query, (table) => `${organization}.${quoteIdentifier(table)}`, (type) => POSTGRES_TYPES[type])}select * from ${asSubquery(query.sql)}`;
  }

  /** The result columns of the statement, planned but not run (`limit 0`). */
  private async describeOn(client: pg.PoolClient, query: GovernedDescribe, organization: string): Promise<pg.FieldDef[]> {
    // Extended protocol, whatever the parameters: it admits one statement only.
    return (await client.query({ text: `${this.governedSelect(query, organization)} limit 0`, values: query.params, queryMode: 'extended' })).fields;
  }

  /**
   * Runs `work` on a connection of the organization's role, in its turn, in a transaction
   * (`access`: read only, or read write and committed when `work` succeeds) stopped past the
   * statement's time limit, with no schema on the search path; its errors classified for the
   * caller. `grant` runs first as the platform's user, in a transaction of its own.
   */
  private async session<T>(
    query: GovernedDescribe,
    access: 'read only' | 'read write',
    work: (client: pg.PoolClient, names: { schema: string; organization: string }) => Promise<T>,
    grant?: (platform: pg.PoolClient, role: string) => Promise<void>,
  ): Promise<T> {
    if (!this.roleKey) throw new GovernedSqlUnavailableError('governed SQL needs the vault key, from which the passwords of its roles are derived');
    const arrived = performance.now();
    const { schema } = await this.prepare();
    const role = await this.ensureRole(query.orgId);
    if (grant) await this.asPlatform((client) => grant(client, role));
    // The organization's turn: its pool never makes a statement wait past its time limit.
    const giveBack = await this.slots.take(query.orgId, query.timeoutMs);
    let client: pg.PoolClient | undefined;
    let lost: Error | undefined;
    let ended = false;
    try {
      client = await this.poolFor(query.orgId, role).connect();
      const remainingMs = Math.max(1, Math.floor(query.timeoutMs - (performance.now() - arrived)));
      // Settings local to the transaction: whatever the statement sets (set_config(…, false)
      // included) is undone when it ends, before the connection is used again.
      await client.query(`begin transaction ${access}; set local statement_timeout = ${remainingMs}; set local search_path = ''`);
      const result = await work(client, { schema, organization: quoteIdentifier(`org_${query.orgId}`) });
      if (access === 'read write') {
        await client.query('commit');
        ended = true;
      }
      return result;
    } catch (err) {
      const placeholders = parameterShortfall(err);
      if (placeholders) throw new QueryRejectedError(`the query names parameter $${placeholders.required} but ${placeholders.given === 1 ? '1 parameter was' : `${placeholders.given} parameters were`} given`);
      if (isPostgresConnectionLost(err)) lost = err as Error;
      throw this.classify(err, (err as { code?: string }).code, query.timeoutMs, query.orgId);
    } finally {
      if (client && !lost && !ended) await client.query('rollback').catch((err: Error) => (lost = err));
      client?.release(lost);
      giveBack();
    }
  }

  /**
   * What a failed statement means for its caller. Every error the database raised about the
   * statement is the statement's own (a 400 naming the reason); a lost connection, a login the
   * server refused, too many connections, or the database's own failure are not.
   */
  private classify(err: unknown, code: string | undefined, timeoutMs: number, orgId: number): Error {
    // XX001/XX002 (corruption) and class 58 (system errors) are the server's; XX000 is what a
    // built-in raises for arguments it cannot use (`satisfies_hash_partition(0, …)`): the statement's.
    if (!code || isPostgresConnectionLost(err) || /^(XX00[12]|58)/.test(code)) return err as Error;
    if (code === '57014') {
      return this.stopping ? new GovernedSqlUnavailableError('the query was stopped: the platform is shutting down') : new QueryTimeoutError(`the query ran longer than ${timeoutMs} ms and was stopped`);
    }
    if (code.startsWith('28')) {
      // The role's login was refused (its password set by an instance with another VAULT_KEY, or
      // pg_hba.conf refusing password logins): set it again on the next statement.
      this.roles.delete(orgId);
      return new GovernedSqlUnavailableError("the database refused the login of the organization's governed SQL role; check that pg_hba.conf admits password logins and every instance shares VAULT_KEY");
    }
    if (code === '53300') return new GovernedSqlUnavailableError('the database has no connection to spare; try again');
    return new QueryRejectedError((err as Error).message);
  }

  /** Stops the statements running now (a cancel request each): the platform is shutting down. */
  async cancelRunning(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.pools.values(), ...this.retired].map((entry) => entry.cancelRunning()));
  }

  /** Stops running statements and closes every pool. */
  async close(): Promise<void> {
    this.closed = true;
    await this.cancelRunning();
    await Promise.all([...this.pools.values(), ...this.retired].map((entry) => entry.pool.end().catch(() => undefined)));
    this.pools.clear();
  }

  /** Rows as they arrive; a row past the byte budget ends the result, marked truncated. */
  private collect(client: pg.PoolClient, text: string, values: unknown[], limit: number): Promise<ReadOnlyResult> {
    return new Promise((resolve, reject) => {
      const rows: unknown[][] = [];
      let fields: pg.FieldDef[] = [];
      const answer = (truncated: ReadOnlyResult['truncated']) =>
        resolve({
          // The last column is the running byte count.
          columns: fields.slice(0, -1).map((f) => ({ name: f.name, type: POSTGRES_COLUMN_TYPES[f.dataTypeID] ?? 'string' })),
          rows: rows.slice(0, limit),
          truncated,
        });
      const running = client.query(new pg.Query({ text, values, rowMode: 'array' } as pg.QueryConfig));
      running.on('row', (row: unknown[], result?: pg.ResultBuilder) => {
        fields = result!.fields;
        row.pop();
        rows.push(row);
      });
      running.on('end', (result: pg.ResultBuilder) => {
        fields = result.fields; // known with no row too
        answer(rows.length > limit ? 'row_limit' : null);
      });
      running.on('error', (err: Error & { code?: string }) => {
        if (err.code !== RESULT_BYTES_EXCEEDED) return reject(err);
        if (rows.length === 0) return reject(new QueryRejectedError(`its first row alone is larger than the result limit (${err.message.replace(/\D+/g, '')} bytes): select fewer or narrower columns`));
        answer('byte_limit');
      });
    });
  }

  /** Once per process: the role prefix of this database and the byte-count function. */
  private prepare(): Promise<Setup> {
    this.setup ??= (async () => {
      const { rows } = await this.platform.query<{ database: string; schema: string; manages: boolean }>(
        'select current_database() as database, current_schema() as schema, (select rolsuper or rolcreaterole from pg_roles where rolname = current_user) as manages',
      );
      const { database, schema, manages } = rows[0];
      const quoted = quoteIdentifier(schema);
      await this.asPlatform(async (client) => {
        await client.query(`select pg_advisory_xact_lock(hashtext('governed-sql-setup'))`);
        await client.query(
          `create or replace function ${quoted}.${BYTES_FUNCTION}(running bigint, budget bigint) returns bigint language plpgsql strict parallel safe as $$
           begin
             if running > budget then raise exception 'governed query result larger than % bytes', budget using errcode = '${RESULT_BYTES_EXCEEDED}'; end if;
             return running;
           end $$`,
        );
      });
      return { prefix: governedRolePrefix(database, schema), schema: quoted, managesRoles: manages };
    })().catch((err) => {
      this.setup = null;
      throw err;
    });
    return this.setup;
  }

  /**
   * The statements an administrator runs where the platform's user may not create roles: the
   * organizations' roles, created (or their passwords set again) as the platform would.
   */
  async roleStatements(orgIds: number[]): Promise<string[]> {
    if (!this.roleKey) throw new GovernedSqlUnavailableError('governed SQL needs the vault key, from which the passwords of its roles are derived');
    const { prefix } = await this.prepare();
    const roles = orgIds.map((orgId) => `${prefix}_org_${orgId}`);
    const { rows } = await this.platform.query<{ rolname: string }>('select rolname from pg_roles where rolname = any($1)', [roles]);
    const existing = new Set(rows.map((r) => r.rolname));
    return roles.map((role) => `${existing.has(role) ? 'alter' : 'create'} role ${quoteIdentifier(role)} with ${this.roleOptions(role)};`);
  }

  /** What a governed role is: a login that is nothing more, with the password derived for it. */
  private roleOptions(role: string): string {
    return `login nosuperuser nocreatedb nocreaterole noinherit noreplication nobypassrls password '${scramVerifier(this.password(role))}'`;
  }

  /**
   * Creates the organization's role, or sets its password again (where the platform may manage
   * roles; otherwise an administrator has created it), and grants it its datasets; once per process.
   */
  private ensureRole(orgId: number): Promise<string> {
    let ensured = this.roles.get(orgId);
    if (!ensured) {
      ensured = (async () => {
        const { prefix, schema, managesRoles } = await this.prepare();
        const role = `${prefix}_org_${orgId}`;
        const quotedRole = quoteIdentifier(role);
        const organization = quoteIdentifier(`org_${orgId}`);
        await this.asPlatform(async (client) => {
          // The setup lock too: granting on the shared byte-count function or schema while another
          // instance's setup replaces them updates one catalog row twice ("tuple concurrently updated").
          await client.query(`select pg_advisory_xact_lock(hashtext('governed-sql-setup'))`);
          await client.query('select pg_advisory_xact_lock(hashtext($1))', [`governed-role:${role}`]);
          const exists = await client.query('select 1 from pg_roles where rolname = $1', [role]);
          if (managesRoles) await client.query(`${exists.rowCount ? 'alter' : 'create'} role ${quotedRole} with ${this.roleOptions(role)}`);
          else if (!exists.rowCount) {
            throw new GovernedSqlUnavailableError(
              `governed SQL runs under a database role per organization, and the platform's database user may not create roles: grant it CREATEROLE, or have an administrator run what \`npm run migrate -- --governed-sql-roles\` prints (see the README's Security model)`,
            );
          }
          await client.query('select pg_advisory_xact_lock(hashtext($1))', [namespaceLockKey(orgId)]);
          await client.query(`create schema if not exists ${organization}`);
          await client.query(`grant usage on schema ${organization} to ${quotedRole}`);
          await client.query(`grant select on all tables in schema ${organization} to ${quotedRole}`);
          // Dataset tables the platform creates later (new datasets, replace uploads) are readable too.
          await client.query(`alter default privileges in schema ${organization} grant select on tables to ${quotedRole}`);
          await client.query(`grant usage on schema ${schema} to ${quotedRole}`);
          await client.query(`grant execute on function ${schema}.${BYTES_FUNCTION}(bigint, bigint) to ${quotedRole}`);
        });
        return role;
      })().catch((err) => {
        this.roles.delete(orgId);
        throw err;
      });
      this.roles.set(orgId, ensured);
    }
    return ensured;
  }

  private password(role: string): string {
    return crypto.createHmac('sha256', this.roleKey!).update(`governed-sql-role:${role}`).digest('base64url');
  }

  private async asPlatform(work: (client: pg.PoolClient) => Promise<void>): Promise<void> {
    const client = await this.platform.connect();
    try {
      await client.query('begin');
      await work(client);
      await client.query('commit');
    } catch (err) {
      await client.query('rollback').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  private poolFor(orgId: number, role: string): pg.Pool {
    if (this.closed) throw new GovernedSqlUnavailableError('the platform is shutting down');
    let entry = this.pools.get(orgId);
    if (entry) {
      this.pools.delete(orgId); // set again below, as the most recently used
    } else {
      // The platform's own target (host, port, database, TLS), logged in as the organization's role.
      const pool = new pg.Pool({
        ...(parseConnectionString(this.connectionString) as pg.PoolConfig),
        user: role,
        password: this.password(role),
        max: CONNECTIONS_PER_ORGANIZATION,
        idleTimeoutMillis: 10_000,
        types: this.resultTypes,
      });
      entry = { pool, ...superviseConnections(pool) };
      if (this.pools.size >= MAX_POOLS) {
        // The least recently used organization's pool ends once its statements have.
        const [oldest, old] = this.pools.entries().next().value as [number, GovernedPool];
        this.pools.delete(oldest);
        this.retired.add(old);
        void old.pool
          .end()
          .catch(() => undefined)
          .finally(() => this.retired.delete(old));
      }
    }
    this.pools.set(orgId, entry);
    return entry.pool;
  }
}
