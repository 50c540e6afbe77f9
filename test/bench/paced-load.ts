/**
 * The light load the benchmarks measure latency under: GETs sent evenly paced, each latency kept
 * in fractional milliseconds.
 *
 * Not autocannon's `overallRate`: its rate limit sends each connection's share of a second as one
 * burst when the second starts, and its coordinated-omission correction (an expected interval of
 * ceil(1 / rate) = 1 ms) records one slow answer as a run of synthetic samples, so the p99 of a
 * light load of a few milliseconds swung from ×0.25 to ×10 between rounds of the same code.
 */
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

export interface PacedLoad {
  url: string;
  headers?: Record<string, string>;
  ratePerS: number;
  seconds: number;
  /** Keep-alive connections the requests share; a request due while all are busy waits for one (and that wait counts). */
  connections: number;
}

export interface LatencySummary {
  p50_ms: number;
  p99_ms: number;
  max_ms: number;
  requests: number;
}

/**
 * Sends a GET every 1000 / ratePerS ms for `seconds` (those that fell due while this process was
 * held up go at once) and answers each request's latency, from its sending to the end of its
 * answer, in ms. Any answer but a 2xx, or a failed request, rejects.
 */
export async function pacedLoad({ url, headers = {}, ratePerS, seconds, connections }: PacedLoad): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const intervalMs = 1000 / ratePerS;
  const total = Math.round(ratePerS * seconds);
  const latencies: number[] = [];
  const pending: Promise<void>[] = [];
  const get = () =>
    new Promise<void>((resolve, reject) => {
      const sent = performance.now();
      http
        .get(url, { agent, headers }, (res) => {
          res.resume();
          res.on('end', () => {
            if (res.statusCode! < 200 || res.statusCode! >= 300) return reject(new Error(`GET ${url}: ${res.statusCode}`));
            latencies.push(performance.now() - sent);
            resolve();
          });
          res.on('error', reject);
        })
        .on('error', reject);
    });
  try {
    const started = performance.now();
    for (let i = 0; i < total; i += 1) {
      const due = started + i * intervalMs;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      pending.push(get());
    }
    await Promise.all(pending);
  } finally {
    agent.destroy();
  }
  return latencies;
}

/** The value under which `p` (0..1) of the latencies lie (nearest rank), rounded to 0.1 ms. */
function percentile(sorted: number[], p: number): number {
  const value = sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
  return Math.round(value * 10) / 10;
}

export function summarize(latencies: number[]): LatencySummary {
  const sorted = [...latencies].sort((a, b) => a - b);
  return { p50_ms: percentile(sorted, 0.5), p99_ms: percentile(sorted, 0.99), max_ms: percentile(sorted, 1), requests: sorted.length };
}
