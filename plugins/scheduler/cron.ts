import { Cron } from 'croner';
import { problems } from '../../kernel/plugin-api.ts';

/** A schedule's timing: a cron expression (5 fields, or 6 with seconds) read in an IANA time zone. */
export interface Timing {
  cron: string;
  timezone: string;
}

/**
 * How late a fire may start and still count as on time: one period of its schedule, but at least
 * 5 s (work due at a time is claimed within WORKER_POLL_MS, and a busy queue adds to it) and at
 * most a minute.
 */
const ON_TIME_MIN_MS = 5_000;
const ON_TIME_MAX_MS = 60_000;

/**
 * croner reads the expression in the zone: a wall-clock time that a spring-forward day skips fires
 * one hour later that day (02:30 → 03:30), and one that a fall-back day repeats fires once — what
 * a person in the zone expects of a daily job.
 */
function cronOf({ cron, timezone }: Timing): Cron {
  return new Cron(cron, { timezone, paused: true });
}

/**
 * The timing, checked: 5 or 6 fields croner accepts (no `@daily` nicknames), that fire at least
 * once, in a time zone the runtime knows by that name. Each fault is a 400 naming its field.
 */
export function checkTiming(timing: Timing, location = 'body'): Timing {
  const fields = timing.cron.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    throw problems.badRequest('a cron expression has 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first', [{ path: `${location}.cron`, message: `has ${fields.length} fields` }]);
  }
  try {
    new Intl.DateTimeFormat('en', { timeZone: timing.timezone });
  } catch {
    throw problems.badRequest('the time zone is not an IANA time zone name such as Europe/Paris', [{ path: `${location}.timezone`, message: 'unknown time zone' }]);
  }
  let cron: Cron;
  try {
    cron = cronOf({ cron: fields.join(' '), timezone: timing.timezone });
  } catch (err) {
    throw problems.badRequest(`the cron expression is not valid: ${(err as Error).message}`, [{ path: `${location}.cron`, message: (err as Error).message }]);
  }
  if (cron.nextRun() === null) throw problems.badRequest('the cron expression never fires', [{ path: `${location}.cron`, message: 'never fires' }]);
  return { cron: fields.join(' '), timezone: timing.timezone };
}

/** The next `count` fire times strictly after `from`. */
export function fireTimes(timing: Timing, from: Date, count: number): Date[] {
  return cronOf(timing).nextRuns(count, from);
}

/** The first fire time strictly after `from` (null: none any more). */
export function nextFire(timing: Timing, from: Date): Date | null {
  return cronOf(timing).nextRun(from);
}

/** Whether a fire due at `due` that starts at `now` was missed (no instance could run it at its time). */
export function missed(timing: Timing, due: Date, now: Date): boolean {
  const following = nextFire(timing, due);
  const period = following === null ? ON_TIME_MAX_MS : following.getTime() - due.getTime();
  return now.getTime() - due.getTime() > Math.min(ON_TIME_MAX_MS, Math.max(ON_TIME_MIN_MS, period));
}

/** A time as the wall clock of a zone reads it, with the zone's offset then: `2026-03-29T03:30:00+02:00`. */
export function wallClock(at: Date, timeZone: string): string {
  const format = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'longOffset' });
  const part = Object.fromEntries(format.formatToParts(at).map((p) => [p.type, p.value]));
  const offset = part.timeZoneName === 'GMT' ? '+00:00' : part.timeZoneName.slice(3);
  return `${part.year}-${part.month}-${part.day}T${part.hour}:${part.minute}:${part.second}${offset}`;
}
