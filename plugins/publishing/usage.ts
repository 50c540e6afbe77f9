import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { EndpointCall } from './calls.ts';
import { LATENCY_BUCKETS, latencyBucket } from './latency-histogram.ts';
import type { ApiService } from './service-store.ts';
import type { MinuteTally, UsageStore } from './usage-store.ts';

/** The service path's call, telling `found` the service once the call's key is found to be one of its keys. */
export type CountableCall = (call: EndpointCall, found: (service: ApiService) => void) => Promise<unknown>;

const MINUTE_MS = 60_000;
const tallyId = (serviceId: number, keyId: number, minute: number, endpoint: string | null) => `${serviceId} ${keyId} ${minute} ${endpoint ?? ''}`;

/**
 * Counts the calls of the service path in memory, per service, key, endpoint and minute, with a
 * histogram of their latencies, and adds the counts to the usage table every `flushEveryMs` (and
 * when stopped): no database write per call. A crash loses what was counted since the last flush.
 */
export class UsageRecorder {
  private pending = new Map<string, MinuteTally>();
  private flushing: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly store: UsageStore,
    flushEveryMs: number,
    private readonly logger: Logger,
  ) {
    this.timer = setInterval(() => void this.flush(), flushEveryMs);
    this.timer.unref();
  }

  /** `call`, counting each call whose service it found: the answer or the problem, and the time from the call to either. */
  counted(call: CountableCall): (call: EndpointCall) => Promise<unknown> {
    return async (endpointCall) => {
      const started = performance.now();
      let service: ApiService | undefined;
      const found = (s: ApiService) => void (service = s);
      try {
        const answer = await call(endpointCall, found);
        if (service) this.count(service, endpointCall, performance.now() - started, false);
        return answer;
      } catch (err) {
        if (service) this.count(service, endpointCall, performance.now() - started, true);
        throw err;
      }
    };
  }

  private count(service: ApiService, call: EndpointCall, ms: number, failed: boolean): void {
    const now = Date.now();
    const minute = now - (now % MINUTE_MS);
    const keyId = Number(call.principal.keyId);
    // A name the service has no endpoint of is counted as one: a caller cannot grow the table with made-up names.
    const endpoint = service.endpoints.some((e) => e.name === call.endpoint) ? call.endpoint : null;
    const id = tallyId(service.id, keyId, minute, endpoint);
    let tally = this.pending.get(id);
    if (!tally) this.pending.set(id, (tally = { serviceId: service.id, keyId, endpoint, minute, calls: new Uint32Array(LATENCY_BUCKETS), errors: new Uint32Array(LATENCY_BUCKETS), lastCallAt: now }));
    const bucket = latencyBucket(ms);
    tally.calls[bucket]++;
    if (failed) tally.errors[bucket]++;
    tally.lastCallAt = Math.max(tally.lastCallAt, now);
  }

  /** Adds what was counted so far to the table (one flush at a time); counts a failed flush could not add are kept for the next. */
  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private async write(): Promise<void> {
    if (!this.pending.size) return;
    const tallies = [...this.pending.values()];
    this.pending = new Map();
    try {
      await this.store.add(tallies);
    } catch (err) {
      for (const tally of tallies) this.restore(tally);
      this.logger.warn({ err }, 'API Service usage could not be written; kept for the next flush');
    }
  }

  /** Puts a tally back among the pending ones, adding it to the one counted since, if any. */
  private restore(tally: MinuteTally): void {
    const id = tallyId(tally.serviceId, tally.keyId, tally.minute, tally.endpoint);
    const newer = this.pending.get(id);
    if (!newer) return void this.pending.set(id, tally);
    for (let i = 0; i < LATENCY_BUCKETS; i++) {
      newer.calls[i] += tally.calls[i];
      newer.errors[i] += tally.errors[i];
    }
    newer.lastCallAt = Math.max(newer.lastCallAt, tally.lastCallAt);
  }

  /** Stops the timer and writes what is still counted (the plugin's dispose: a restart or a reload loses nothing). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flushing;
    await this.flush();
  }
}
