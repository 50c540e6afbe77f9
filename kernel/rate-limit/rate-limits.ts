import type { Principal } from '../auth/principal.ts';
import { principalKey } from '../auth/principal.ts';
import { problems } from '../problem.ts';
import type { RateDecision, RateLimitStore } from './rate-limit-store.ts';

/** A named allowance: `limit` requests per `windowMs`, refilled evenly. */
export interface RateBudget {
  /** Distinguishes budgets of one caller (e.g. `api_key`, `sql.run`). */
  name: string;
  limit: number;
  windowMs: number;
  /** The 429's detail when the budget is spent; a generic sentence otherwise. */
  detail?: string;
  /** What this take spends (default one request): a budget of tokens spends a call's tokens. */
  cost?: number;
}

/**
 * Rate limits as a service: a principal's budgets, kept in the configured store (shared by every
 * instance when it is the database), with no HTTP request needed — background work spends the
 * budget of the user it acts for.
 */
export class RateLimits {
  constructor(private readonly store: RateLimitStore) {}

  /** Spends one request of `principal`'s budget; a 429 problem (with Retry-After) when it is spent. */
  take(principal: Principal, budget: RateBudget): Promise<void> {
    return this.takeKey(`${budget.name}:${principalKey(principal)}`, budget);
  }

  /** As `take`, for a budget named by a key of the caller's choosing (a token, an address). */
  async takeKey(key: string, budget: RateBudget): Promise<void> {
    const decision = await this.decide(key, budget);
    if (!decision.allowed) {
      throw problems.tooManyRequests(budget.detail ?? `more than ${budget.limit} requests in ${budget.windowMs / 1000} s; retry later`, Math.max(1, Math.ceil(decision.retryAfterMs / 1000)));
    }
  }

  /** Spends from the budget named `key` if it holds enough, else says how long until it would: for a caller that may wait a little before refusing. */
  decide(key: string, budget: RateBudget): Promise<RateDecision> {
    return this.store.take(key, budget.limit, budget.windowMs, budget.cost);
  }
}
