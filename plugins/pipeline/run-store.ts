import type { Kysely } from 'kysely';
import { beforeIdCursor, problems, type DomainEvents } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import { RUN_FINISHED, type Run, type RunFilter, type RunFinishedEvent, type RunKind, type RunStatus, type RunTrigger } from './public.ts';

/** Statuses a run does not leave. */
export const FINAL_STATUSES: RunStatus[] = ['succeeded', 'failed', 'cancelled', 'skipped'];

export interface NewRun {
  kind: RunKind;
  trigger: RunTrigger;
  project_id: number;
  recipe_id?: number | null;
  job_id?: number | null;
  parent_run_id?: number | null;
  schedule_id?: number | null;
  scenario_id?: number | null;
  targets?: number[] | null;
  mode?: string | null;
  /** A build's child run: the runs of the recipes it waits for. */
  waits_for?: number[] | null;
  created_by: number | null;
  status?: RunStatus;
  error?: { title: string; detail: string } | null;
  /** At most one run of the organization holds a key (see RunStartOptions). */
  idempotency_key?: string | null;
}


/** Runs and their log lines, one organization at a time. */
export class RunStore {
  constructor(
    private readonly storage: Storage,
    private readonly events: DomainEvents,
  ) {}

  async create(orgId: number, run: NewRun, db: Kysely<any> = this.storage.db): Promise<Run> {
    const row = await db
      .insertInto('pipeline_runs')
      .values({
        org_id: orgId,
        kind: run.kind,
        status: run.status ?? 'queued',
        trigger: run.trigger,
        project_id: run.project_id,
        recipe_id: run.recipe_id ?? null,
        job_id: run.job_id ?? null,
        parent_run_id: run.parent_run_id ?? null,
        schedule_id: run.schedule_id ?? null,
        scenario_id: run.scenario_id ?? null,
        targets: run.targets ? this.storage.encodeJson(run.targets) : null,
        mode: run.mode ?? null,
        waits_for: run.waits_for ? this.storage.encodeJson(run.waits_for) : null,
        error: run.error ? this.storage.encodeJson(run.error) : null,
        created_by: run.created_by,
        idempotency_key: run.idempotency_key ?? null,
        created_at: this.storage.now(),
        ...(run.status && FINAL_STATUSES.includes(run.status) ? { ended_at: this.storage.now() } : {}),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return this.decode(row);
  }

  /**
   * Starts a run with `start` in a transaction, once per idempotency key: with a key a run of the
   * organization already holds, answers that run instead. The key is looked up in the same
   * transaction; when two attempts at once both find none (Postgres: neither sees the other's
   * uncommitted run), the unique index refuses the second one's run, rolling back all it wrote,
   * and it answers the first one's.
   */
  async createOnce(orgId: number, key: string | null | undefined, start: (trx: Kysely<any>) => Promise<Run>): Promise<Run> {
    if (!key) return this.storage.transaction(start);
    try {
      return await this.storage.transaction(async (trx) => (await this.byKey(orgId, key, trx)) ?? start(trx));
    } catch (err) {
      const existing = this.storage.isUniqueViolation(err) ? await this.byKey(orgId, key) : undefined;
      if (!existing) throw err;
      return existing;
    }
  }

  private async byKey(orgId: number, key: string, db: Kysely<any> = this.storage.db): Promise<Run | undefined> {
    const row = await db.selectFrom('pipeline_runs').selectAll().where('org_id', '=', orgId).where('idempotency_key', '=', key).executeTakeFirst();
    return row && this.decode(row);
  }

  async get(orgId: number, id: number, db: Kysely<any> = this.storage.db): Promise<Run> {
    const row = await db.selectFrom('pipeline_runs').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (!row) throw problems.notFound(`no run ${id} in this organization`);
    return this.decode(row);
  }

  async children(orgId: number, parentId: number, db: Kysely<any> = this.storage.db): Promise<Run[]> {
    const rows = await db.selectFrom('pipeline_runs').selectAll().where('org_id', '=', orgId).where('parent_run_id', '=', parentId).orderBy('id').execute();
    return rows.map((r) => this.decode(r));
  }

  /** Changes a run unless it already ended; answers whether it changed. */
  /** What a child run of a build waits for (its id → the run ids). */
  async waits(orgId: number, parentId: number, db: Kysely<any> = this.storage.db): Promise<Map<number, number[]>> {
    const rows = await db.selectFrom('pipeline_runs').select(['id', 'waits_for']).where('org_id', '=', orgId).where('parent_run_id', '=', parentId).execute();
    return new Map(rows.map((r) => [Number(r.id), r.waits_for === null ? [] : this.storage.decodeJson<number[]>(r.waits_for)]));
  }

  /**
   * Changes a run unless it already ended; answers whether it changed. A run that ends here
   * publishes `run.finished` in the same transaction: the event exists exactly when the end does.
   */
  async update(id: number, changes: Partial<{ status: RunStatus; work_id: number; started_at: string; ended_at: string; rows_written: number; progress_done: number; progress_total: number; error: { title: string; detail: string } | null; input_versions: Record<string, number> }>, db: Kysely<any> = this.storage.db): Promise<boolean> {
    const ending = changes.status !== undefined && FINAL_STATUSES.includes(changes.status);
    if (ending && !db.isTransaction) return this.storage.transaction((trx) => this.update(id, changes, trx));
    const { error, input_versions, ...plain } = changes;
    const query = db
      .updateTable('pipeline_runs')
      .set({
        ...plain,
        ...(error !== undefined ? { error: error === null ? null : this.storage.encodeJson(error) } : {}),
        ...(input_versions !== undefined ? { input_versions: this.storage.encodeJson(input_versions) } : {}),
      })
      .where('id', '=', id)
      .where('status', 'not in', FINAL_STATUSES);
    if (!ending) return Number((await query.executeTakeFirst()).numUpdatedRows) > 0;
    const row = await query.returningAll().executeTakeFirst();
    if (!row) return false;
    const run = this.decode(row);
    const payload: RunFinishedEvent = {
      run_id: run.id,
      kind: run.kind,
      status: run.status as RunFinishedEvent['status'],
      trigger: run.trigger,
      project_id: run.project_id,
      recipe_id: run.recipe_id,
      job_id: run.job_id,
      scenario_id: run.scenario_id,
      parent_run_id: run.parent_run_id,
      created_by: run.created_by,
      error: run.error,
      started_at: run.started_at,
      ended_at: run.ended_at,
      duration_ms: run.duration_ms,
    };
    await this.events.publish({ type: RUN_FINISHED, orgId: Number(row.org_id), payload }, db);
    return true;
  }

  /** The input versions the recipe's last successful run read (null: it never succeeded). */
  async lastSuccess(orgId: number, recipeId: number): Promise<Record<string, number> | null> {
    const row = await this.storage.db
      .selectFrom('pipeline_runs')
      .select('input_versions')
      .where('org_id', '=', orgId)
      .where('recipe_id', '=', recipeId)
      .where('status', '=', 'succeeded')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
    return row ? this.storage.decodeJson<Record<string, number>>(row.input_versions) : null;
  }

  /** The status of each recipe's latest run. */
  async lastStatuses(orgId: number, recipeIds: number[]): Promise<Map<number, RunStatus>> {
    if (recipeIds.length === 0) return new Map();
    const latest = this.storage.db.selectFrom('pipeline_runs').select((eb) => eb.fn.max('id').as('id')).where('org_id', '=', orgId).where('recipe_id', 'in', recipeIds).groupBy('recipe_id');
    const rows = await this.storage.db.selectFrom('pipeline_runs').select(['recipe_id', 'status']).where('id', 'in', latest).execute();
    return new Map(rows.map((r) => [Number(r.recipe_id), r.status as RunStatus]));
  }

  /** Runs not yet ended (for the sweep that settles runs whose work ended without them). */
  async unfinished(limit: number): Promise<{ id: number; org_id: number; work_id: number | null; kind: RunKind }[]> {
    const rows = await this.storage.db.selectFrom('pipeline_runs').select(['id', 'org_id', 'work_id', 'kind']).where('status', 'in', ['queued', 'running']).orderBy('id').limit(limit).execute();
    return rows.map((r) => ({ id: Number(r.id), org_id: Number(r.org_id), work_id: r.work_id === null ? null : Number(r.work_id), kind: r.kind as RunKind }));
  }

  async list(orgId: number, filter: RunFilter): Promise<{ items: Run[]; next_cursor: string | null }> {
    let query = this.storage.db.selectFrom('pipeline_runs').selectAll().where('org_id', '=', orgId);
    if (filter.status?.length) query = query.where('status', 'in', filter.status);
    if (filter.kind) query = query.where('kind', '=', filter.kind);
    if (filter.trigger) query = query.where('trigger', '=', filter.trigger);
    if (filter.project_id !== undefined) query = query.where('project_id', '=', filter.project_id);
    if (filter.job_id !== undefined) query = query.where('job_id', '=', filter.job_id);
    if (filter.recipe_id !== undefined) query = query.where('recipe_id', '=', filter.recipe_id);
    if (filter.parent_run_id !== undefined) query = query.where('parent_run_id', '=', filter.parent_run_id);
    if (filter.schedule_id !== undefined) query = query.where('schedule_id', '=', filter.schedule_id);
    if (filter.scenario_id !== undefined) query = query.where('scenario_id', '=', filter.scenario_id);
    if (filter.since) query = query.where('created_at', '>=', filter.since);
    if (filter.until) query = query.where('created_at', '<', filter.until);
    if (filter.cursor) query = query.where('id', '<', beforeIdCursor.decode(filter.cursor));
    const rows = await query.orderBy('id', 'desc').limit(filter.limit + 1).execute();
    const items = rows.slice(0, filter.limit).map((r) => this.decode(r));
    return { items, next_cursor: rows.length > filter.limit ? beforeIdCursor.encode(items[items.length - 1].id) : null };
  }

  async log(runId: number, level: 'info' | 'warn' | 'error', message: string, db: Kysely<any> = this.storage.db): Promise<void> {
    await db.insertInto('pipeline_run_logs').values({ run_id: runId, ts: this.storage.now(), level, message: message.slice(0, 10_000) }).execute();
  }

  async logs(orgId: number, runId: number): Promise<{ ts: string; level: string; message: string }[]> {
    await this.get(orgId, runId);
    return this.storage.db.selectFrom('pipeline_run_logs').select(['ts', 'level', 'message']).where('run_id', '=', runId).orderBy('id').limit(10_000).execute();
  }

  private decode(row: Record<string, any>): Run {
    const started = row.started_at ?? null;
    const ended = row.ended_at ?? null;
    return {
      id: Number(row.id),
      kind: row.kind,
      status: row.status,
      trigger: row.trigger,
      project_id: Number(row.project_id),
      recipe_id: row.recipe_id === null ? null : Number(row.recipe_id),
      job_id: row.job_id === null ? null : Number(row.job_id),
      parent_run_id: row.parent_run_id === null ? null : Number(row.parent_run_id),
      schedule_id: row.schedule_id === null ? null : Number(row.schedule_id),
      scenario_id: row.scenario_id === null ? null : Number(row.scenario_id),
      targets: row.targets === null ? null : this.storage.decodeJson<number[]>(row.targets),
      mode: row.mode ?? null,
      created_by: row.created_by === null ? null : Number(row.created_by),
      created_at: row.created_at,
      started_at: started,
      ended_at: ended,
      duration_ms: started && ended ? Math.max(0, Date.parse(ended) - Date.parse(started)) : null,
      rows_written: row.rows_written === null ? null : Number(row.rows_written),
      progress: row.progress_total === null || row.progress_total === undefined ? null : { done: Number(row.progress_done), total: Number(row.progress_total) },
      error: row.error === null ? null : this.storage.decodeJson<{ title: string; detail: string }>(row.error),
      input_versions: row.input_versions === null ? null : this.storage.decodeJson<Record<string, number>>(row.input_versions),
    };
  }
}
