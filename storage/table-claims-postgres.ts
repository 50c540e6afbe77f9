import crypto from 'node:crypto';
import pg from 'pg';

/** The 64-bit advisory lock key of a claimed table name (one namespace of keys for claims). */
const keyOf = (name: string) => crypto.createHash('sha256').update(`table-claim:${name}`).digest().readBigInt64BE(0).toString();

/**
 * Claims on tables, shared by every instance on one Postgres: a claim is a session advisory lock
 * keyed by the table's name, held on one connection of this instance's own (outside the pool, so a
 * load never waits on the pool for it, and many claims cost one connection). A claim another
 * instance holds cannot be taken; one whose process died is gone with its session. A lost session
 * is opened again on next use and takes the claims still held again.
 */
export class PostgresTableClaims {
  private session: Promise<pg.Client> | undefined;
  private readonly held = new Set<string>();
  private closed = false;

  constructor(private readonly config: pg.ClientConfig) {}

  /** Waits until `name` is free, then holds it until the returned function runs. */
  async claim(name: string): Promise<() => Promise<void>> {
    const key = keyOf(name);
    await (await this.connect()).query('select pg_advisory_lock($1::bigint)', [key]);
    this.held.add(key);
    return () => this.release(key);
  }

  /** Holds `name` if nobody does (until the returned function runs), else null. */
  async tryClaim(name: string): Promise<(() => Promise<void>) | null> {
    const key = keyOf(name);
    // Session advisory locks are re-entrant: this instance's own claim would be taken again.
    if (this.held.has(key)) return null;
    const { rows } = await (await this.connect()).query<{ taken: boolean }>('select pg_try_advisory_lock($1::bigint) as taken', [key]);
    if (!rows[0].taken) return null;
    this.held.add(key);
    return () => this.release(key);
  }

  async close(): Promise<void> {
    this.closed = true;
    const session = this.session;
    this.session = undefined;
    if (session) await (await session).end().catch(() => undefined);
  }

  private async release(key: string): Promise<void> {
    if (!this.held.delete(key) || !this.session) return;
    // A lost session took the lock with it.
    await (await this.session).query('select pg_advisory_unlock($1::bigint)', [key]).catch(() => undefined);
  }

  private connect(): Promise<pg.Client> {
    if (this.closed) return Promise.reject(new Error('the storage is closed'));
    const opening = (this.session ??= (async () => {
      const client = new pg.Client(this.config);
      // The session ending (a DBA, a failover) must not end the process; the next use opens another.
      client.on('error', () => {
        if (this.session === opening) this.session = undefined;
      });
      await client.connect();
      for (const key of this.held) await client.query('select pg_advisory_lock($1::bigint)', [key]);
      return client;
    })());
    opening.catch(() => {
      if (this.session === opening) this.session = undefined;
    });
    return opening;
  }
}
