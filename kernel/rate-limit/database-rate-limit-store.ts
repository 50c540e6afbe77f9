import { sql, type RawBuilder } from 'kysely';
import type { Storage } from '../../storage/index.ts';
import type { RateDecision, RateLimitStore } from './rate-limit-store.ts';

/** The kernel table holding the buckets (see the kernel migration `rate_limit_buckets`). */
export const RATE_LIMIT_TABLE = 'rate_limit_buckets';
/** How often, at most, a take also deletes the buckets that are full again. */
const SWEEP_INTERVAL_MS = 60_000;

const num = (value: number): RawBuilder<number> => sql<number>`cast(${value} as double precision)`;

/**
 * Token buckets in the shared database, so every instance on one Postgres spends the same budget.
 * The same arithmetic as the in-memory store, done by the database in one statement per take: an
 * INSERT … ON CONFLICT DO UPDATE … RETURNING locks the key's row, refills the bucket for the time
 * since its last take, takes one token if there is one and answers whether it did — atomic on
 * Postgres and SQLite alike, with no read-then-write race between instances.
 *
 * Time is each instance's wall clock (instances keep NTP time); a clock behind the stored one
 * refills nothing rather than draining. A bucket that would be full again is the same as none:
 * such rows are deleted at most once a minute, so the table follows the active keys only.
 */
export class DatabaseRateLimitStore implements RateLimitStore {
  private nextSweepAt = 0;

  constructor(
    private readonly storage: Storage,
    private readonly now: () => number = Date.now,
  ) {}

  async take(key: string, limit: number, windowMs: number, cost = 1): Promise<RateDecision> {
    const now = this.now();
    if (now >= this.nextSweepAt) {
      this.nextSweepAt = now + SWEEP_INTERVAL_MS;
      await this.sweep(now);
    }
    const perMs = limit / windowMs;
    const stored = sql.ref(`${RATE_LIMIT_TABLE}.tokens`);
    const storedAt = sql.ref(`${RATE_LIMIT_TABLE}.updated_at_ms`);
    const elapsed = sql`case when ${num(now)} > ${storedAt} then ${num(now)} - ${storedAt} else ${num(0)} end`;
    const refilled = sql`case when ${stored} + ${elapsed} * ${num(perMs)} >= ${num(limit)} then ${num(limit)} else ${stored} + ${elapsed} * ${num(perMs)} end`;
    const take = sql<{ tokens: number; granted: number }>`
      insert into ${sql.table(RATE_LIMIT_TABLE)} (key, tokens, granted, updated_at_ms, full_at_ms)
      values (${key}, case when ${num(cost)} <= ${num(limit)} then ${num(limit - cost)} else ${num(limit)} end, case when ${num(cost)} <= ${num(limit)} then 1 else 0 end, ${num(now)}, ${num(now + windowMs)})
      on conflict (key) do update set
        tokens = case when ${refilled} >= ${num(cost)} then ${refilled} - ${num(cost)} else ${refilled} end,
        granted = case when ${refilled} >= ${num(cost)} then 1 else 0 end,
        updated_at_ms = case when ${num(now)} > ${storedAt} then ${num(now)} else ${storedAt} end,
        full_at_ms = ${num(now + windowMs)}
      returning tokens, granted`;
    // A take runs on every request: its commit must not wait for a disk flush. A counter lost in a
    // crash of the database server only gives a client a little more budget.
    const { rows } = await this.storage.transaction(async (trx) => {
      await this.storage.commitLazily(trx);
      return take.execute(trx);
    });
    const { tokens, granted } = rows[0];
    if (Number(granted) === 1) return { allowed: true, retryAfterMs: 0 };
    return { allowed: false, retryAfterMs: Math.ceil((cost - Number(tokens)) / perMs) };
  }

  private async sweep(now: number): Promise<void> {
    await this.storage.db.deleteFrom(RATE_LIMIT_TABLE).where('full_at_ms', '<', now).execute();
  }
}
