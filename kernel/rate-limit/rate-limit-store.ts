export interface RateDecision {
  allowed: boolean;
  /** When refused: how long until one more request would be allowed. */
  retryAfterMs: number;
}

/**
 * Counts requests per key. The in-process store serves a single box; several instances sharing
 * limits need a store backed by the shared database or a cache, behind this same interface.
 */
export interface RateLimitStore {
  /** Takes `cost` (one request, or a number of units such as tokens) from `key`'s budget of `limit` per `windowMs`. */
  take(key: string, limit: number, windowMs: number, cost?: number): Promise<RateDecision>;
}

interface Bucket {
  tokens: number;
  updatedAt: number;
}

const SWEEP_EVERY = 10_000;

/**
 * Token buckets in memory: a key may burst up to `limit` requests, refilled evenly over
 * `windowMs`. Idle buckets (full again) are swept so memory follows the active keys only.
 */
export class MemoryRateLimitStore implements RateLimitStore {
  private readonly buckets = new Map<string, Bucket>();
  private operations = 0;

  constructor(private readonly now: () => number = () => performance.now()) {}

  async take(key: string, limit: number, windowMs: number, cost = 1): Promise<RateDecision> {
    const now = this.now();
    const refillPerMs = limit / windowMs;
    const bucket = this.buckets.get(key) ?? { tokens: limit, updatedAt: now };
    bucket.tokens = Math.min(limit, bucket.tokens + (now - bucket.updatedAt) * refillPerMs);
    bucket.updatedAt = now;
    this.buckets.set(key, bucket);
    if (++this.operations % SWEEP_EVERY === 0) this.sweep(now, windowMs);
    if (bucket.tokens >= cost) {
      bucket.tokens -= cost;
      return { allowed: true, retryAfterMs: 0 };
    }
    return { allowed: false, retryAfterMs: Math.ceil((cost - bucket.tokens) / refillPerMs) };
  }

  private sweep(now: number, windowMs: number) {
    for (const [key, bucket] of this.buckets) if (now - bucket.updatedAt > windowMs) this.buckets.delete(key);
  }
}
