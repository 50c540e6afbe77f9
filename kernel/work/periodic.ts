import { Cron } from 'croner';
import type { Logger } from 'pino';

/** setTimeout holds at most ~24.8 days; a farther fire time is reached in steps. */
const LONGEST_WAIT_MS = 60 * 60_000;

/**
 * Calls `fire(at)` at each time a cron expression names (croner: 5 fields, or 6 with seconds, in an
 * IANA time zone). Every instance runs its own copy; `at` is the scheduled time itself (not the
 * moment the timer woke), so instances agree on it and the work they enqueue for it is one item.
 * A time passed while no instance ran is not fired afterwards.
 */
export class PeriodicTimer {
  private readonly cron: Cron;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    pattern: string,
    timezone: string | undefined,
    private readonly fire: (at: Date) => Promise<void>,
    private readonly logger: Logger,
  ) {
    // Throws a TypeError naming what is wrong with the pattern or the zone.
    this.cron = new Cron(pattern, { timezone, paused: true });
    if (this.cron.nextRun() === null) throw new TypeError(`cron pattern "${pattern}" never fires`);
  }

  start(): void {
    this.schedule(new Date());
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(after: Date) {
    if (this.stopped) return;
    const next = this.cron.nextRun(after);
    if (!next) return;
    const wait = next.getTime() - Date.now();
    this.timer = setTimeout(
      () => {
        if (Date.now() < next.getTime()) return this.schedule(after);
        this.fire(next)
          .catch((err) => this.logger.error({ err, at: next.toISOString() }, 'periodic work could not be enqueued'))
          .finally(() => this.schedule(next));
      },
      Math.max(0, Math.min(wait, LONGEST_WAIT_MS)),
    );
    this.timer.unref();
  }
}
