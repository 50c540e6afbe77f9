import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { ApiKeyPrincipal, Maybe } from '../../kernel/plugin-api.ts';
import type { EndpointCall } from './calls.ts';
import { LATENCY_BUCKETS, latencyBucket } from './latency-histogram.ts';
import type { ApiService } from './service-store.ts';
import type { MinuteTally, UsageStore } from './usage-store.ts';

/** Where the service path notes the service of a call, once the call's key is found to be one of its keys. */
export interface FoundService {
  service?: ApiService;
}

/** The service path's call, noting its service in `found`; its answer at hand when it was in memory. */
export type CountableCall = (call: EndpointCall, found: FoundService) => Maybe<unknown>;

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
/** How often an instance deletes the usage older than its retention (and at its first flush). */
const PRUNE_EVERY_MS = 3_600_000;
const tallyId = (serviceId: number, keyId: number, minute: number, endpoint: string | null) => `${serviceId} ${keyId} ${minute} ${endpoint ?? ''}`;

/**
 * Counts the calls of the service path in memory, per service, key, endpoint and minute, with a
 * histogram of their latencies, and adds the counts to the usage table every `flushEveryMs` (and
 * when stopped): no database write per call. A crash loses what was counted since the last flush.
 */
export class UsageRecorder {
  private pending = new Map<string, MinuteTally>();
  /** Per key (its principal: one object while the key is unchanged), the tally its last call counted in, and in which pending map. */
  private readonly lastTally = new WeakMap<ApiKeyPrincipal, { tally: MinuteTally; pending: Map<string, MinuteTally>; service: ApiService; asked: string }>();
  private flushing: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout;
  private prunedAt = 0;

  /** `retentionDays`: days of usage kept (0: all of it). */
  constructor(
    private readonly store: UsageStore,
    flushEveryMs: number,
    private readonly logger: Logger,
    private readonly retentionDays = 0,
  ) {
    this.timer = setInterval(() => void this.flush(), flushEveryMs);
    this.timer.unref();
  }

  /** `call`, counting each call whose service it found: the answer or the problem, and the time from the call to either. */
  counted(call: CountableCall): (call: EndpointCall) => Maybe<unknown> {
    return (endpointCall) => {
      const started = performance.now();
      const found: FoundService = {};
      let answer: Maybe<unknown>;
      try {
        answer = call(endpointCall, found);
      } catch (err) {
        this.count(found, endpointCall, started, true);
        throw err;
      }
      if (!(answer instanceof Promise)) {
        this.count(found, endpointCall, started, false);
        return answer;
      }
      return answer.then(
        (value) => {
          this.count(found, endpointCall, started, false);
          return value;
        },
        (err: unknown) => {
          this.count(found, endpointCall, started, true);
          throw err;
        },
      );
    };
  }

  private count({ service }: FoundService, call: EndpointCall, started: number, failed: boolean): void {
    if (!service) return;
    const ms = performance.now() - started;
    const now = Date.now();
    const tally = this.tallyOf(service, call, now - (now % MINUTE_MS), now);
    const bucket = latencyBucket(ms);
    tally.calls[bucket]++;
    if (failed) tally.errors[bucket]++;
    tally.lastCallAt = Math.max(tally.lastCallAt, now);
  }

  /**
   * The pending tally a call counts in. A key's calls mostly repeat one endpoint within a minute: the
   * tally its last call counted in is taken again without making the tally's id and looking it up.
   */
  private tallyOf(service: ApiService, call: EndpointCall, minute: number, now: number): MinuteTally {
    const last = this.lastTally.get(call.principal);
    if (last && last.pending === this.pending && last.service === service && last.asked === call.endpoint && last.tally.minute === minute) return last.tally;
    const keyId = Number(call.principal.keyId);
    // A name the service has no endpoint of is counted as one: a caller cannot grow the table with made-up names.
    const endpoint = service.endpoints.some((e) => e.name === call.endpoint) ? call.endpoint : null;
    const id = tallyId(service.id, keyId, minute, endpoint);
    let tally = this.pending.get(id);
    if (!tally) this.pending.set(id, (tally = { serviceId: service.id, keyId, endpoint, minute, calls: new Uint32Array(LATENCY_BUCKETS), errors: new Uint32Array(LATENCY_BUCKETS), lastCallAt: now }));
    this.lastTally.set(call.principal, { tally, pending: this.pending, service, asked: call.endpoint });
    return tally;
  }

  /** Adds what was counted so far to the table (one flush at a time); counts a failed flush could not add are kept for the next. */
  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private async write(): Promise<void> {
    await this.pruneWhenDue();
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

  /** Deletes the usage older than the retention, at the first flush and then every PRUNE_EVERY_MS; a failure is tried again at the next due time. */
  private async pruneWhenDue(): Promise<void> {
    const now = Date.now();
    if (this.retentionDays <= 0 || now - this.prunedAt < PRUNE_EVERY_MS) return;
    this.prunedAt = now;
    try {
      await this.store.prune(now - this.retentionDays * DAY_MS);
    } catch (err) {
      this.logger.warn({ err }, 'API Service usage older than its retention could not be deleted; tried again within the hour');
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
