/**
 * Latency histograms of fixed log-scale buckets, the same on every instance so that their counts
 * add up: bucket 0 holds latencies up to 0.1 ms, bucket i those in (0.1·1.25^(i-1), 0.1·1.25^i] ms,
 * and the last one (from about 52 s) everything slower.
 */
const SMALLEST_MS = 0.1;
const GROWTH = 1.25;
/** 0.1 ms · 1.25^60 ≈ 65 s: the 61 buckets reach past a minute. */
export const LATENCY_BUCKETS = 61;

export function latencyBucket(ms: number): number {
  if (!(ms > SMALLEST_MS)) return 0;
  return Math.min(LATENCY_BUCKETS - 1, Math.ceil(Math.log(ms / SMALLEST_MS) / Math.log(GROWTH)));
}

/** The latency a bucket stands for: the geometric middle of its bounds, within ±12% of every latency in it. */
function bucketMs(bucket: number): number {
  return Math.round(SMALLEST_MS * GROWTH ** (bucket - 0.5) * 1000) / 1000;
}

/** The q-quantile (nearest rank) of the latencies counted in `counts` (one count per bucket), in ms; null when none is. */
export function quantileMs(counts: ArrayLike<number>, q: number): number | null {
  let total = 0;
  for (let i = 0; i < counts.length; i++) total += counts[i];
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i];
    if (seen >= rank) return bucketMs(i);
  }
  return bucketMs(counts.length - 1);
}
