import { sql, type Kysely } from 'kysely';
import { problems, type StoredActor } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';

export const CATCH_UP = ['skip', 'run_once'] as const;
export type CatchUp = (typeof CATCH_UP)[number];

export interface Schedule {
  id: number;
  org_id: number;
  project_id: number;
  name: string;
  target_field: string;
  target_id: number;
  cron: string;
  timezone: string;
  enabled: boolean;
  catch_up: CatchUp;
  /** The time of the pending fire; null while paused or disabled. */
  next_run_at: string | null;
  /** Why the scheduler disabled it (its target gone, its owner unable to act); null otherwise. */
  disabled_reason: string | null;
  /** Bumped by every change: part of each fire's dedupe key, so a fire time can be armed again after a change. */
  generation: number;
  /** The work item of the pending fire: the only one that may fire the schedule and arm the next. */
  pending_work_id: number | null;
  /** The user its fires act for: whoever last created, changed or resumed it. */
  owner_id: number;
  /** The scopes of the token the owner saved it with (null: the owner's full permissions). */
  owner_scopes: string[] | null;
  created_at: string;
  updated_at: string;
}

/** What a caller sets; the rest is the scheduler's. */
export type ScheduleFields = Pick<Schedule, 'project_id' | 'name' | 'target_field' | 'target_id' | 'cron' | 'timezone' | 'enabled' | 'catch_up'>;

export type FireOutcome = 'firing' | 'fired' | 'failed' | 'missed' | 'target_missing';

export interface Fire {
  id: number;
  schedule_id: number;
  /** The time it was due. */
  fire_at: string;
  started_at: string;
  outcome: FireOutcome;
  run_id: number | null;
  error: string | null;
}

const SCHEDULES = 'scheduler_schedules';
const FIRES = 'scheduler_fires';

/** Schedules and their fire history, one organization at a time (the fire path by id). */
export class ScheduleStore {
  constructor(private readonly storage: Storage) {}

  private decode = (row: Record<string, any>): Schedule => ({
    ...(row as Schedule),
    id: Number(row.id),
    org_id: Number(row.org_id),
    project_id: Number(row.project_id),
    target_id: Number(row.target_id),
    enabled: Boolean(row.enabled),
    generation: Number(row.generation),
    pending_work_id: row.pending_work_id === null ? null : Number(row.pending_work_id),
    owner_id: Number(row.owner_id),
    owner_scopes: row.owner_scopes === null ? null : this.storage.decodeJson<string[]>(row.owner_scopes),
  });

  async create(orgId: number, fields: ScheduleFields, owner: StoredActor, db: Kysely<any>): Promise<Schedule> {
    const now = this.storage.now();
    return this.conflictIfNamed(fields, async () =>
      this.decode(
        await db
          .insertInto(SCHEDULES)
          .values({ org_id: orgId, ...fields, generation: 0, owner_id: owner.userId, owner_scopes: owner.scopes === null ? null : this.storage.encodeJson(owner.scopes), created_at: now, updated_at: now })
          .returningAll()
          .executeTakeFirstOrThrow(),
      ),
    );
  }

  async list(orgId: number, projectId?: number): Promise<Schedule[]> {
    let query = this.storage.db.selectFrom(SCHEDULES).selectAll().where('org_id', '=', orgId);
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    return (await query.orderBy('id').execute()).map(this.decode);
  }

  async find(orgId: number, id: number, db: Kysely<any> = this.storage.db): Promise<Schedule | undefined> {
    const row = await db.selectFrom(SCHEDULES).selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    return row && this.decode(row);
  }

  async get(orgId: number, id: number, db?: Kysely<any>): Promise<Schedule> {
    const schedule = await this.find(orgId, id, db);
    if (!schedule) throw problems.notFound(`no schedule ${id} in this organization`);
    return schedule;
  }

  /**
   * Changes a schedule (fields, enabled, owner) and drops its pending fire: the change starts a new
   * generation, whose fire the caller arms. Answers the schedule as it now is, with the dropped item.
   */
  async change(orgId: number, id: number, changes: Partial<ScheduleFields> & { disabled_reason?: string | null; owner?: StoredActor }, db: Kysely<any>): Promise<{ schedule: Schedule; dropped: number | null }> {
    const current = await this.get(orgId, id, db);
    const { owner, ...fields } = changes;
    const name = fields.name ?? current.name;
    await this.conflictIfNamed({ name, project_id: current.project_id }, () =>
      db
        .updateTable(SCHEDULES)
        .set({
          ...fields,
          ...(owner ? { owner_id: owner.userId, owner_scopes: owner.scopes === null ? null : this.storage.encodeJson(owner.scopes) } : {}),
          generation: current.generation + 1,
          pending_work_id: null,
          next_run_at: null,
          updated_at: this.storage.now(),
        })
        .where('id', '=', id)
        .execute(),
    );
    return { schedule: await this.get(orgId, id, db), dropped: current.pending_work_id };
  }

  /**
   * Records the pending fire of a schedule, if `expected` is still its pending item (null: none);
   * false when another change came first. `next` null means it fires no more: it is disabled.
   */
  async arm(id: number, expected: number | null, next: { at: string; workId: number } | null, db: Kysely<any>): Promise<boolean> {
    const set = next ? { next_run_at: next.at, pending_work_id: next.workId } : { next_run_at: null, pending_work_id: null, enabled: false, disabled_reason: 'its cron expression fires no more' };
    let query = db.updateTable(SCHEDULES).set(set).where('id', '=', id);
    query = expected === null ? query.where('pending_work_id', 'is', null) : query.where('pending_work_id', '=', expected);
    const result = await query.executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /** Disables a schedule whose pending item is still `expected`, saying why; false when another change came first. */
  async disable(id: number, expected: number, reason: string, db: Kysely<any>): Promise<boolean> {
    const result = await db
      .updateTable(SCHEDULES)
      .set({ enabled: false, disabled_reason: reason, next_run_at: null, pending_work_id: null, updated_at: this.storage.now() })
      .where('id', '=', id)
      .where('pending_work_id', '=', expected)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  async remove(orgId: number, id: number): Promise<Schedule> {
    const schedule = await this.get(orgId, id);
    await this.storage.db.deleteFrom(SCHEDULES).where('org_id', '=', orgId).where('id', '=', id).execute();
    return schedule;
  }

  async countInProject(orgId: number, projectId: number): Promise<number> {
    const { n } = await this.storage.db.selectFrom(SCHEDULES).select((eb) => eb.fn.countAll<number>().as('n')).where('org_id', '=', orgId).where('project_id', '=', projectId).executeTakeFirstOrThrow();
    return Number(n);
  }

  /** Enabled schedules whose pending fire was due before `before`, in every organization: those whose chain may have broken. */
  async overdue(before: string, limit: number): Promise<Schedule[]> {
    return (await this.storage.db.selectFrom(SCHEDULES).selectAll().where('enabled', '=', true).where('next_run_at', '<', before).orderBy('next_run_at').limit(limit).execute()).map(this.decode);
  }

  /**
   * Records a fire time of a schedule, by the work item `work_id` that fires it (a fire that ends
   * at once has none); a second record of the same time fails (unique).
   */
  async recordFire(fire: { org_id: number; schedule_id: number; fire_at: string; outcome: FireOutcome; error?: string | null; work_id?: number }, db: Kysely<any>): Promise<number> {
    const row = await db
      .insertInto(FIRES)
      .values({ ...fire, error: fire.error ?? null, work_id: fire.work_id ?? null, started_at: this.storage.now() })
      .returning('id')
      .executeTakeFirstOrThrow();
    return Number(row.id);
  }

  /** The fire of a schedule at `fireAt` still `firing` that the work item `workId` is to finish, if any. */
  async unfinishedFire(scheduleId: number, fireAt: string, workId: number): Promise<number | undefined> {
    const row = await this.storage.db
      .selectFrom(FIRES)
      .select('id')
      .where('schedule_id', '=', scheduleId)
      .where('fire_at', '=', fireAt)
      .where('work_id', '=', workId)
      .where('outcome', '=', 'firing')
      .executeTakeFirst();
    return row && Number(row.id);
  }

  /** Fires still `firing` that started before `before`, in every organization, with the work item finishing each. */
  async staleFires(before: string, limit: number): Promise<{ id: number; org_id: number; schedule_id: number; fire_at: string; work_id: number }[]> {
    const rows = await this.storage.db
      .selectFrom(FIRES)
      .select(['id', 'org_id', 'schedule_id', 'fire_at', 'work_id'])
      // A literal, as the partial index scheduler_fires_firing says it (SQLite uses it only then).
      .where('outcome', '=', sql.lit('firing'))
      .where('started_at', '<', before)
      // Fires recorded before fires named their item: whether their run started is unknown.
      .where('work_id', 'is not', null)
      .orderBy('started_at')
      .limit(limit)
      .execute();
    return rows.map((row) => ({ id: Number(row.id), org_id: Number(row.org_id), schedule_id: Number(row.schedule_id), fire_at: row.fire_at, work_id: Number(row.work_id) }));
  }

  /** Gives a fire still `firing` by the work item `from` to the item `to`; false when it ended or another took it first. */
  async handFire(id: number, from: number, to: number, db: Kysely<any>): Promise<boolean> {
    const result = await db.updateTable(FIRES).set({ work_id: to }).where('id', '=', id).where('work_id', '=', from).where('outcome', '=', 'firing').executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  /**
   * Records how a fire ended, once (a fire that ended stays so). Committed lazily (Postgres): a
   * crash of the database server may lose it, leaving the fire `firing` until the sweep finishes
   * it again, while the fire itself and the next one were committed before.
   */
  async endFire(id: number, outcome: FireOutcome, result: { run_id?: number; error?: string }): Promise<void> {
    await this.storage.transaction(async (trx) => {
      await this.storage.commitLazily(trx);
      await trx.updateTable(FIRES).set({ outcome, run_id: result.run_id ?? null, error: result.error ?? null }).where('id', '=', id).where('outcome', '=', 'firing').execute();
    });
  }

  /** A schedule's fires, newest first. */
  async fires(orgId: number, scheduleId: number, limit: number): Promise<Fire[]> {
    const rows = await this.storage.db
      .selectFrom(FIRES)
      .select(['id', 'schedule_id', 'fire_at', 'started_at', 'outcome', 'run_id', 'error'])
      .where('org_id', '=', orgId)
      .where('schedule_id', '=', scheduleId)
      .orderBy('fire_at', 'desc')
      .limit(limit)
      .execute();
    return rows.map((row) => ({ ...(row as Fire), id: Number(row.id), schedule_id: Number(row.schedule_id), run_id: row.run_id === null ? null : Number(row.run_id) }));
  }

  private async conflictIfNamed<T>(fields: { name: string; project_id: number }, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (this.storage.isUniqueViolation(err)) throw problems.conflict(`a schedule named "${fields.name}" already exists in project ${fields.project_id}`);
      throw err;
    }
  }
}
