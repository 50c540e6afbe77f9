import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Storage } from '../../storage/index.ts';
import { EVENT_CHANNEL, EventStore, type PlatformEvent } from './event-store.ts';

export interface Subscription {
  /** `<plugin id>.<name>`: its position in the outbox survives restarts and reloads under this id. */
  id: string;
  types: string[];
  /** Where a subscriber seen for the first time starts: events published from now on, or every event kept. */
  from: 'now' | 'beginning';
  handle(event: PlatformEvent): Promise<void>;
}

export interface DispatcherSettings {
  /** How often positions are looked at without a wake-up. */
  pollMs: number;
  /** Deliveries of one event to one subscriber before it is skipped (logged, and named in `last_error`). */
  maxAttempts: number;
}

interface Active {
  subscription: Subscription;
  /** The delivery under way, if any. */
  delivering: Promise<void> | undefined;
  again: boolean;
  retryAt: number;
  closed: boolean;
  /** While this instance holds the position's lease (until then), the position it last wrote. */
  held: { until: number; position: number } | null;
}

const LEASE_MS = 30_000;
const BATCH = 100;
const RETRY_BASE_MS = 1_000;
const RETRY_MAX_MS = 60_000;

/**
 * Delivers outbox events to subscribers after they commit, at least once and in id order: each
 * subscriber's position is leased to one instance at a time and moves past an event only once
 * its handler returned. A failing handler is retried with backoff (its position unmoved), up to
 * `maxAttempts`, then that event is skipped so one bad event cannot stop a subscriber forever.
 */
export class EventDispatcher {
  readonly owner = `${process.pid}-${randomUUID()}`;
  private readonly store: EventStore;
  private readonly active = new Map<string, Active>();
  private timer: NodeJS.Timeout | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private stopped = true;

  constructor(
    private readonly storage: Storage,
    private readonly settings: DispatcherSettings,
    private readonly logger: Logger,
  ) {
    this.store = new EventStore(storage);
  }

  async start(): Promise<void> {
    this.stopped = false;
    this.unlisten = await this.storage.listen(EVENT_CHANNEL, () => this.wake());
    this.timer = setInterval(() => this.wake(), this.settings.pollMs);
    this.timer.unref();
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.unlisten?.();
    await Promise.all([...this.active.values()].map((a) => this.close(a)));
  }

  /**
   * Starts delivering to a subscription; returns what stops it (after the delivery under way). A
   * subscription with the id of one already here (a reloading plugin's new version) takes over
   * once the delivery under way for the old one has ended, so no event is handed to both.
   */
  subscribe(subscription: Subscription): () => Promise<void> {
    const previous = this.active.get(subscription.id);
    const active: Active = { subscription, delivering: undefined, again: false, retryAt: 0, closed: false, held: null };
    this.active.set(subscription.id, active);
    if (previous) {
      previous.closed = true;
      active.delivering = Promise.resolve(previous.delivering).then(() => {
        active.delivering = undefined;
        this.deliver(active);
      });
    } else {
      this.deliver(active);
    }
    return () => this.close(active);
  }

  wake(): void {
    if (this.stopped) return;
    for (const active of this.active.values()) this.deliver(active);
  }

  private async close(active: Active) {
    active.closed = true;
    active.held = null;
    await active.delivering;
    // A newer version that took the subscription over keeps its lease.
    if (this.active.get(active.subscription.id) !== active) return;
    this.active.delete(active.subscription.id);
    await this.store.release(active.subscription.id, this.owner).catch((err) => this.logger.warn({ err }, 'releasing an event subscription failed'));
  }

  private deliver(active: Active) {
    if (active.closed || this.stopped) return;
    if (active.delivering) {
      active.again = true;
      return;
    }
    if (Date.now() < active.retryAt) return;
    active.delivering = this.drain(active)
      .catch((err) => this.logger.error({ err, subscriber: active.subscription.id }, 'event delivery failed'))
      .finally(() => {
        active.delivering = undefined;
        if (active.again) {
          active.again = false;
          this.deliver(active);
        }
      });
  }

  /** Hands the subscriber every event after its position, batch by batch, while it holds the lease. */
  private async drain(active: Active): Promise<void> {
    const { subscription } = active;
    for (let position = await this.position(active); position !== null && !active.closed; position = await this.position(active)) {
      const events = await this.store.read({ after: position, types: subscription.types, limit: BATCH });
      for (const event of events) {
        if (active.closed) return;
        try {
          await subscription.handle(event);
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          const failures = await this.store.failed(subscription.id, this.owner, message);
          if (failures < this.settings.maxAttempts) {
            this.logger.warn({ err, subscriber: subscription.id, event: event.id, failures }, 'event handler failed; it will be retried');
            active.retryAt = Date.now() + Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** (failures - 1));
            setTimeout(() => this.deliver(active), active.retryAt - Date.now()).unref();
            return;
          }
          this.logger.error({ err, subscriber: subscription.id, event: event.id, failures }, 'event handler failed too often; the event is skipped');
          if (!(await this.moveTo(active, event.id, `event ${event.id} skipped after ${failures} failures: ${message}`))) return;
          continue;
        }
        if (!(await this.moveTo(active, event.id, null))) return;
      }
      if (events.length < BATCH) return;
    }
  }

  /**
   * The subscriber's position, if this instance holds (or now takes) its lease. A lease with more
   * than half its time left is not renewed: a wake with nothing new then costs one read, no write.
   */
  private async position(active: Active): Promise<number | null> {
    const now = Date.now();
    if (active.held && active.held.until - now > LEASE_MS / 2) return active.held.position;
    const { subscription } = active;
    const start = active.held === null && subscription.from === 'now' ? await this.store.newestId() : 0;
    const position = await this.store.lease(subscription.id, this.owner, start, new Date(now + LEASE_MS).toISOString());
    active.held = position === null ? null : { until: now + LEASE_MS, position };
    return position;
  }

  /** Moves the position past an event; false when another instance took the subscriber over. */
  private async moveTo(active: Active, eventId: number, skipped: string | null): Promise<boolean> {
    const moved = await this.store.advance(active.subscription.id, this.owner, eventId, skipped);
    active.held = moved && active.held ? { ...active.held, position: eventId } : null;
    return moved;
  }
}
