import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Storage } from '../../storage/index.ts';
import type { RequestAudit } from '../audit/audit-service.ts';
import type { RunPrincipal } from '../auth/principal.ts';
import { RunNotAuthorizedError } from '../auth/run-principals.ts';
import { WORK_CHANNEL, WorkStore, type WorkEndReason, type WorkItem, type WorkProgress } from './work-store.ts';

/** What a handler gets for one attempt of one item. */
export interface WorkContext<P = unknown> {
  readonly item: WorkItem;
  readonly payload: P;
  readonly orgId: number | null;
  /** The run acting for the user who asked for the work (their capabilities as of this attempt); null for platform work. */
  readonly principal: RunPrincipal | null;
  /** The audit log as this run: rows name the run and the user it acts for. */
  readonly audit: RequestAudit;
  /** Aborted when the item is cancelled, times out, its lease is lost, or its plugin or instance stops; `signal.reason` says which. */
  readonly signal: AbortSignal;
  /** Records how far the work is (visible to whoever reads the item). */
  progress(progress: WorkProgress): Promise<void>;
  readonly log: Logger;
}

export interface WorkHandler {
  /** The plugin that registered it (its version: a reload registers a new handler). */
  pluginId: string;
  run(context: WorkContext): Promise<unknown>;
}

/** Why a signal was aborted: the reason a handler sees, and how the item ends. */
export class WorkAborted extends Error {
  constructor(readonly reason: WorkEndReason | 'released') {
    super(reason === 'released' ? 'the work was handed back to the queue (its plugin or instance is stopping)' : reason === 'timeout' ? 'the work ran out of time' : reason === 'lost' ? 'another instance took the work over' : 'the work was cancelled');
  }
}

/** How the runner learns who a run is and records what it does. */
export interface RunIdentity {
  /** The run's principal, resolved when it starts; throws when the user may not act any more (the item fails, not retried). */
  principalOf(item: WorkItem): Promise<RunPrincipal | null>;
  auditFor(principal: RunPrincipal | null, orgId: number | null): RequestAudit;
}

export interface RunnerSettings {
  /** Items this process runs at once. */
  concurrency: number;
  /** Items of one organization running at once, across instances. */
  orgConcurrency: number;
  /** How often the queue is looked at without a wake-up. */
  pollMs: number;
  /** How long a claim lasts without a heartbeat; heartbeats come three times per lease. */
  leaseMs: number;
}

/** A wake (a cancel is one) checks running items for cancel requests at most this often. */
const CANCEL_CHECK_MS = 200;

interface Running {
  item: WorkItem;
  handler: WorkHandler;
  controller: AbortController;
  settled: Promise<void>;
}

/**
 * Runs the background work of the kinds this process has handlers for: claims due items (leased,
 * skipping those other instances claimed), runs each with an AbortSignal and a timeout, renews
 * leases, takes over the work of instances whose leases expired, and records each outcome.
 */
export class WorkRunner {
  readonly owner = `${process.pid}-${randomUUID()}`;
  private readonly store: WorkStore;
  private readonly handlers = new Map<string, WorkHandler[]>();
  private readonly running = new Map<number, Running>();
  private pollTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | undefined;
  private again = false;
  private stopped = true;
  private lastReclaimMs = 0;
  private lastHeartbeatMs = 0;
  /** When the earliest queued item not due at the last poll becomes due: the next poll comes then, not a whole interval later. */
  private nextDueMs: number | null = null;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(
    private readonly storage: Storage,
    private readonly settings: RunnerSettings,
    private readonly identity: RunIdentity,
    private readonly logger: Logger,
  ) {
    this.store = new WorkStore(storage);
  }

  async start(): Promise<void> {
    this.stopped = false;
    this.unlisten = await this.storage.listen(WORK_CHANNEL, () => this.wake());
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), Math.max(1, Math.floor(this.settings.leaseMs / 3)));
    this.heartbeatTimer.unref();
    this.wake();
  }

  /** Stops claiming; work still running after `timeoutMs` is aborted and handed back to the queue. */
  async stop(timeoutMs: number): Promise<void> {
    this.stopped = true;
    clearTimeout(this.pollTimer);
    clearInterval(this.heartbeatTimer);
    await this.unlisten?.();
    await this.polling;
    await this.drain([...this.running.values()], timeoutMs);
  }

  /** The newest handler of a kind serves new items; returns what removes it (draining its running items). */
  register(kind: string, handler: WorkHandler, drainTimeoutMs: number): () => Promise<void> {
    const stack = this.handlers.get(kind) ?? [];
    stack.push(handler);
    this.handlers.set(kind, stack);
    this.wake();
    return async () => {
      const remaining = (this.handlers.get(kind) ?? []).filter((h) => h !== handler);
      if (remaining.length) this.handlers.set(kind, remaining);
      else this.handlers.delete(kind);
      await this.drain([...this.running.values()].filter((r) => r.handler === handler), drainTimeoutMs);
    };
  }

  /** Looks at the queue soon (coalesced): new work, a cancel, a handler registered. */
  wake(): void {
    if (this.stopped) return;
    if (this.polling) {
      this.again = true;
      return;
    }
    clearTimeout(this.pollTimer);
    this.polling = this.poll()
      .catch((err) => this.logger.error({ err }, 'background work poll failed'))
      .finally(() => {
        this.polling = undefined;
        if (this.stopped) return;
        if (this.again) {
          this.again = false;
          this.wake();
        } else {
          const untilDue = this.nextDueMs === null ? this.settings.pollMs : this.nextDueMs - Date.now();
          this.pollTimer = setTimeout(() => this.wake(), Math.max(0, Math.min(this.settings.pollMs, untilDue)));
          this.pollTimer.unref();
        }
      });
  }

  private async poll(): Promise<void> {
    const now = this.storage.now();
    const nowMs = Date.now();
    this.nextDueMs = null;
    // Wakes come with every enqueue and every finished item: the bookkeeping that does not need
    // them runs at most once per interval, so a burst of work costs claims, not sweeps.
    if (nowMs - this.lastReclaimMs >= this.settings.pollMs) {
      this.lastReclaimMs = nowMs;
      if ((await this.store.reclaimExpired(now)) > 0) this.again = true;
    }
    if (nowMs - this.lastHeartbeatMs >= CANCEL_CHECK_MS) await this.heartbeat();
    if (this.running.size >= this.settings.concurrency) return;
    const kinds = [...this.handlers.keys()];
    for (const orgId of await this.store.dueGroups(kinds, now)) {
      const free = this.settings.concurrency - this.running.size;
      if (free <= 0 || this.stopped) return;
      const leaseUntil = new Date(Date.now() + this.settings.leaseMs).toISOString();
      const claimed = await this.store.claim(this.owner, kinds, orgId, free, this.settings.orgConcurrency, now, leaseUntil);
      for (const item of claimed) this.execute(item);
    }
    // Work enqueued to run later (runAfter: a schedule's next fire, a retry's backoff) starts when due.
    this.nextDueMs = await this.store.nextDue(kinds, now);
  }

  private execute(item: WorkItem) {
    const handler = this.handlers.get(item.kind)?.at(-1);
    const log = this.logger.child({ work: item.id, kind: item.kind });
    if (!handler) {
      // Unregistered between claim and run (its plugin unloading): back to the queue, as a drain hands it back.
      this.store.release(this.owner, item.id).catch((err) => log.error({ err }, 'handing background work back failed'));
      return;
    }
    const controller = new AbortController();
    const run = async () => {
      const timer = setTimeout(() => controller.abort(new WorkAborted('timeout')), item.timeout_ms);
      try {
        const aborted = new Promise<never>((_, reject) => controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true }));
        aborted.catch(() => undefined);
        const principal = await Promise.race([this.identity.principalOf(item), aborted]);
        const context: WorkContext = {
          item,
          payload: item.payload,
          orgId: item.org_id,
          principal,
          audit: this.identity.auditFor(principal, item.org_id),
          signal: controller.signal,
          progress: (progress) => this.store.progress(this.owner, item.id, progress),
          log,
        };
        // The outcome is recorded when the signal aborts even if the handler ignores it: a handler
        // that never returns cannot keep its item running forever.
        return await Promise.race([handler.run(context), aborted]);
      } finally {
        clearTimeout(timer);
      }
    };
    const settled = run().then(
      (result) => this.store.finish(this.owner, item, { status: 'succeeded', result }),
      (err) => this.recordFailure(item, controller.signal, err, log),
    );
    const entry: Running = {
      item,
      handler,
      controller,
      settled: settled
        .catch((err) => log.error({ err }, 'recording the outcome of background work failed'))
        .finally(() => {
          this.running.delete(item.id);
          this.wake();
        }),
    };
    this.running.set(item.id, entry);
  }

  private async recordFailure(item: WorkItem, signal: AbortSignal, err: unknown, log: Logger) {
    const abort = signal.aborted && signal.reason instanceof WorkAborted ? signal.reason.reason : null;
    if (abort === 'released') return this.store.release(this.owner, item.id);
    if (abort === 'lost') return; // another instance holds it now
    const reason: WorkEndReason = abort ?? (err instanceof RunNotAuthorizedError ? 'forbidden' : 'error');
    const message = err instanceof Error ? err.message : String(err);
    if (reason === 'error') log.warn({ err }, 'background work failed');
    await this.store.finish(this.owner, item, { status: reason === 'cancelled' ? 'cancelled' : 'failed', reason, error: message });
  }

  /** Renews the leases of running items; aborts those cancelled or taken over. */
  private async heartbeat(): Promise<void> {
    this.lastHeartbeatMs = Date.now();
    if (this.running.size === 0) return;
    const leaseUntil = new Date(Date.now() + this.settings.leaseMs).toISOString();
    let held: Map<number, boolean>;
    try {
      held = await this.store.heartbeat(this.owner, [...this.running.keys()], leaseUntil);
    } catch (err) {
      this.logger.error({ err }, 'background work heartbeat failed');
      return;
    }
    for (const [id, running] of this.running) {
      if (running.controller.signal.aborted) continue;
      if (!held.has(id)) running.controller.abort(new WorkAborted('lost'));
      else if (held.get(id)) running.controller.abort(new WorkAborted('cancelled'));
    }
  }

  /** Waits for these items up to `timeoutMs`, then aborts the rest (they go back to the queue) and waits for their outcome. */
  private async drain(items: Running[], timeoutMs: number): Promise<void> {
    if (items.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const all = Promise.all(items.map((r) => r.settled));
    await Promise.race([all, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
    for (const r of items) if (!r.controller.signal.aborted) r.controller.abort(new WorkAborted('released'));
    await all;
  }
}
