import type { Kysely } from 'kysely';
import type { BackgroundWork, RunPrincipal, StoredActor, WorkContext, WorkItem } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import { missed, nextFire } from './cron.ts';
import type { ScheduleTarget } from './public.ts';
import type { Schedule, ScheduleStore } from './schedule-store.ts';

/** The kind of work of one pending fire (`scheduler.fire`). */
export const FIRE_WORK = 'fire';

export interface FirePayload {
  schedule_id: number;
  /** The time the fire is due, ISO-8601. */
  fire_at: string;
}

/** How long one fire may take (starting a run and recording it): a minute is plenty. */
export const FIRE_TIMEOUT_MS = 60_000;
/**
 * Attempts of a fire's work. A fire whose instance died is safe to run again: before its fire was
 * recorded, the retry fires it; after, the retry finishes it with the same fire key, which starts
 * at most one run.
 */
export const FIRE_ATTEMPTS = 3;
/** How long past its time a pending fire must be before the sweep looks at its item. */
const OVERDUE_MS = 2_000;
/** Schedules the sweep looks at per pass. */
const SWEEP_BATCH = 500;

/** Thrown inside a transaction that arms a schedule when the schedule changed under it: nothing it wrote stays. */
export class Superseded extends Error {}

/** What a target is given to name a fire: the same for every attempt to finish it. */
const fireKey = (fireId: number) => `schedule-fire:${fireId}`;

/** Why a schedule's work item ended `forbidden`, as a fire's error and a disabled schedule say it. */
const ownerRefusal = (item: WorkItem) => `its owner may not act any more: ${item.error ?? 'forbidden'}`;

/** A schedule's target kind, or why it cannot be fired. */
type Resolved = { target: ScheduleTarget } | { missing: string };

/** Who a schedule's fires act for: its owner, narrowed to the scopes of the token it was saved with. */
function ownerOf(schedule: Schedule): StoredActor {
  return { userId: schedule.owner_id, scopes: schedule.owner_scopes };
}

/**
 * Firing schedules. Each enabled schedule has exactly one pending fire: a work item due at its next
 * time, which the schedule row names (`pending_work_id`). Only that item may fire it: it records
 * the fire and arms the next in one transaction (so a crash loses or doubles no link of the chain),
 * then starts the target's run. A change to the schedule replaces the pending item, so a fire of an
 * older version does nothing. Every instance may run a fire; the work queue gives each item to one,
 * and the fire history's unique (schedule, time) refuses a second record of a time. A fire
 * recorded but not ended (its instance died) is finished by the item that recorded it, retried, or
 * by one the sweep hands it to: the fire names its item, and its key keeps it to one run.
 */
export class Firing {
  constructor(
    private readonly storage: Storage,
    private readonly store: ScheduleStore,
    private readonly work: BackgroundWork,
    /** The target kind of a field, if a plugin enabled in the organization contributes it. */
    private readonly targetOf: (orgId: number, field: string) => Promise<ScheduleTarget | undefined>,
    /** Whether the scheduler serves the organization (its plugin may be disabled there). */
    private readonly serves: (orgId: number) => boolean | Promise<boolean>,
  ) {}

  /**
   * Enqueues the schedule's first fire after `from` and records it as pending, if `expected` is
   * still its pending item; a schedule that fires no more is disabled. Throws Superseded otherwise.
   */
  async arm(schedule: Schedule, from: Date, expected: number | null, db: Kysely<any>): Promise<void> {
    const next = nextFire(schedule, from);
    let pending = null;
    if (next) {
      const fireAt = next.toISOString();
      const item = await this.work.enqueue(
        FIRE_WORK,
        {
          orgId: schedule.org_id,
          payload: { schedule_id: schedule.id, fire_at: fireAt } satisfies FirePayload,
          onBehalfOf: ownerOf(schedule),
          runAfter: next,
          // A generation starts with each change: after a pause and a resume, the same time is a new fire.
          dedupeKey: `schedule:${schedule.id}:${schedule.generation}:${fireAt}`,
        },
        db,
      );
      if (!item) throw new Superseded();
      pending = { at: fireAt, workId: item.id };
    }
    if (!(await this.store.arm(schedule.id, expected, pending, db))) throw new Superseded();
  }

  /** Runs `change` in a transaction; false when the schedule changed under it (nothing written). */
  private async unlessSuperseded(change: (trx: Kysely<any>) => Promise<void>): Promise<boolean> {
    try {
      await this.storage.transaction(change);
      return true;
    } catch (err) {
      if (err instanceof Superseded || this.storage.isUniqueViolation(err)) return false;
      throw err;
    }
  }

  /**
   * The `scheduler.fire` work: one pending fire of one schedule. A fire is kept in the fire history,
   * not in the audit log: a schedule firing every second would write 86,400 audit rows a day.
   */
  async fire({ payload, item, orgId, principal }: WorkContext<FirePayload>): Promise<unknown> {
    const schedule = orgId === null ? undefined : await this.store.find(orgId, payload.schedule_id);
    if (!schedule) return { outcome: 'superseded' };
    if (schedule.pending_work_id !== item.id) {
      // Not the pending fire (any more): a retry of an item whose instance died after recording
      // its fire (and arming the next), or an item the sweep handed a fire to, finishes that fire;
      // any other item was replaced by a change of the schedule.
      const fireId = await this.store.unfinishedFire(schedule.id, payload.fire_at, item.id);
      return fireId === undefined ? { outcome: 'superseded' } : this.finish(schedule, fireId, await this.resolve(schedule), principal);
    }
    // Disabled in the organization: no fire, and the chain goes on, so enabling it again resumes the schedule.
    if (!(await this.serves(schedule.org_id))) {
      const armed = await this.unlessSuperseded((trx) => this.arm(schedule, new Date(), item.id, trx));
      return { outcome: armed ? 'not_served' : 'superseded' };
    }
    const record = (outcome: 'firing' | 'missed' | 'target_missing', error: string | null, trx: Kysely<any>) =>
      this.store.recordFire({ org_id: schedule.org_id, schedule_id: schedule.id, fire_at: payload.fire_at, outcome, error, work_id: outcome === 'firing' ? item.id : undefined }, trx);

    const resolved = await this.resolve(schedule);
    if ('missing' in resolved) {
      const disabled = await this.unlessSuperseded(async (trx) => {
        if (!(await this.store.disable(schedule.id, item.id, resolved.missing, trx))) throw new Superseded();
        await record('target_missing', resolved.missing, trx);
      });
      return { outcome: disabled ? 'target_missing' : 'superseded' };
    }

    // Started past its time (no instance ran it then): `skip` records the time as missed, `run_once`
    // fires once for the whole missed period; either way the next fire is the first one from now.
    const now = new Date();
    const late = missed(schedule, new Date(payload.fire_at), now);
    const skip = late && schedule.catch_up === 'skip';
    let fireId = 0;
    const armed = await this.unlessSuperseded(async (trx) => {
      fireId = await record(skip ? 'missed' : 'firing', skip ? `no instance ran it on time (it started at ${now.toISOString()}): skipped (catch_up: skip)` : null, trx);
      await this.arm(schedule, late ? now : new Date(payload.fire_at), item.id, trx);
    });
    if (!armed) return { outcome: 'superseded' };
    if (skip) return { outcome: 'missed' };
    return this.finish(schedule, fireId, resolved, principal);
  }

  /** The schedule's target kind, or why it cannot be fired: the target gone, or no plugin offering its kind here. */
  private async resolve(schedule: Schedule): Promise<Resolved> {
    const target = await this.targetOf(schedule.org_id, schedule.target_field);
    if (target && (await target.find(schedule.org_id, schedule.target_id))) return { target };
    return { missing: target ? `its target (${schedule.target_field} ${schedule.target_id}) no longer exists` : `no plugin offers "${schedule.target_field}" targets here any more` };
  }

  /**
   * Starts a recorded fire's run and records how the fire ended. Every attempt at one fire passes
   * the target the same fire key, so finishing a fire again (its instance died) starts no second run.
   */
  private async finish(schedule: Schedule, fireId: number, resolved: Resolved, principal: RunPrincipal | null): Promise<unknown> {
    try {
      if ('missing' in resolved) throw new Error(resolved.missing);
      if (!principal) throw new Error('the fire has no owner to act for');
      const { run_id } = await resolved.target.fire(schedule.org_id, schedule.target_id, principal, schedule.id, fireKey(fireId));
      await this.store.endFire(fireId, 'fired', { run_id });
      return { outcome: 'fired', run_id };
    } catch (err) {
      const error = (err as { detail?: string }).detail ?? (err as Error).message;
      await this.store.endFire(fireId, 'failed', { error });
      return { outcome: 'failed', error };
    }
  }

  /**
   * The periodic sweep (`scheduler.sweep`): a schedule whose pending fire is past due and whose item
   * ended without arming the next — it never started because its owner may no longer act
   * (reason `forbidden`: the schedule is disabled, saying so), or its instance died at every
   * attempt before the fire was recorded — is armed again from now. Then the fires left `firing`.
   */
  async sweep(): Promise<{ disabled: number; rearmed: number; handed: number; failed: number }> {
    const counts = { disabled: 0, rearmed: 0 };
    const now = new Date();
    for (const schedule of await this.store.overdue(new Date(now.getTime() - OVERDUE_MS).toISOString(), SWEEP_BATCH)) {
      const expected = schedule.pending_work_id;
      const item = expected === null ? undefined : await this.work.get(expected);
      if (item && (item.status === 'queued' || item.status === 'running')) continue;
      if (item?.reason === 'forbidden' && expected !== null) {
        const reason = ownerRefusal(item);
        const done = await this.unlessSuperseded(async (trx) => {
          if (!(await this.store.disable(schedule.id, expected, reason, trx))) throw new Superseded();
          await this.store.recordFire({ org_id: schedule.org_id, schedule_id: schedule.id, fire_at: schedule.next_run_at!, outcome: 'failed', error: reason }, trx);
        });
        if (done) counts.disabled++;
      } else if (await this.unlessSuperseded((trx) => this.arm(schedule, now, expected, trx))) {
        counts.rearmed++;
      }
    }
    return { ...counts, ...(await this.sweepUnfinished(now)) };
  }

  /**
   * Fires left `firing` for longer than a fire may take, whose item ended without finishing them
   * (its instance died at every attempt, it timed out, or how the fire ended was lost in a crash of
   * the database server): each is handed to a new item acting for the schedule's owner (the sweep
   * acts for nobody), which finishes it as a retry would, with the same fire key: at most one run,
   * and a target gone since fails it saying so. A fire whose item ended `forbidden` fails: its
   * owner may not act any more.
   */
  private async sweepUnfinished(now: Date): Promise<{ handed: number; failed: number }> {
    const counts = { handed: 0, failed: 0 };
    for (const fire of await this.store.staleFires(new Date(now.getTime() - FIRE_TIMEOUT_MS).toISOString(), SWEEP_BATCH)) {
      const item = await this.work.get(fire.work_id);
      if (item && (item.status === 'queued' || item.status === 'running')) continue;
      if (item?.reason === 'forbidden') {
        await this.store.endFire(fire.id, 'failed', { error: ownerRefusal(item) });
        counts.failed++;
        continue;
      }
      const schedule = await this.store.find(fire.org_id, fire.schedule_id);
      if (!schedule) continue;
      const handed = await this.unlessSuperseded(async (trx) => {
        const next = await this.work.enqueue(FIRE_WORK, { orgId: fire.org_id, payload: { schedule_id: fire.schedule_id, fire_at: fire.fire_at } satisfies FirePayload, onBehalfOf: ownerOf(schedule) }, trx);
        if (!next || !(await this.store.handFire(fire.id, fire.work_id, next.id, trx))) throw new Superseded();
      });
      if (handed) counts.handed++;
    }
    return counts;
  }
}
