import type { Kysely } from 'kysely';
import { problems, type StoredActor } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { ScenarioReporter, ScenarioTrigger, StepStatus } from './scenario-schemas.ts';

export interface ScenarioStep {
  type: string;
  name: string;
  params: Record<string, unknown>;
  continue_on_failure: boolean;
}

export interface Scenario {
  id: number;
  org_id: number;
  project_id: number;
  name: string;
  steps: ScenarioStep[];
  triggers: ScenarioTrigger[];
  reporters: ScenarioReporter[];
  /** Who triggered runs act for: the user who last saved the scenario, and the scopes of the token they saved it with (null: none). */
  run_as: StoredActor;
  trigger_seq: number;
  created_at: string;
  updated_at: string;
}

export type ScenarioFields = Pick<Scenario, 'project_id' | 'name' | 'steps' | 'triggers' | 'reporters'>;

/** One step of a scenario run, with its outcome. */
export interface StepRun extends ScenarioStep {
  id: number;
  position: number;
  status: StepStatus;
  children_after: number;
  started_at: string | null;
  ended_at: string | null;
  output: Record<string, unknown> | null;
  error: string | null;
}

/** Scenarios of one organization at a time, and the steps of their runs. */
export class ScenarioStore {
  constructor(private readonly storage: Storage) {}

  async list(orgId: number, projectId?: number): Promise<Scenario[]> {
    let query = this.storage.db.selectFrom('pipeline_scenarios').selectAll().where('org_id', '=', orgId);
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    return (await query.orderBy('id').execute()).map((row) => this.decode(row));
  }

  async find(orgId: number, id: number, db: Kysely<any> = this.storage.db): Promise<Scenario | null> {
    const row = await db.selectFrom('pipeline_scenarios').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    return row ? this.decode(row) : null;
  }

  async get(orgId: number, id: number, db: Kysely<any> = this.storage.db): Promise<Scenario> {
    const scenario = await this.find(orgId, id, db);
    if (!scenario) throw problems.notFound(`no scenario ${id} in this organization`);
    return scenario;
  }

  async create(orgId: number, fields: ScenarioFields, savedBy: Scenario['run_as']): Promise<Scenario> {
    const now = this.storage.now();
    const row = await this.named(fields, () =>
      this.storage.db
        .insertInto('pipeline_scenarios')
        .values({ org_id: orgId, project_id: fields.project_id, name: fields.name, ...this.encoded(fields), ...this.runAs(savedBy), created_by: savedBy.userId, created_at: now, updated_at: now })
        .returning('id')
        .executeTakeFirstOrThrow(),
    );
    return this.get(orgId, Number(row.id));
  }

  async update(orgId: number, id: number, fields: ScenarioFields, savedBy: Scenario['run_as']): Promise<Scenario> {
    await this.named(fields, () =>
      this.storage.db
        .updateTable('pipeline_scenarios')
        .set({ name: fields.name, ...this.encoded(fields), ...this.runAs(savedBy), updated_at: this.storage.now() })
        .where('org_id', '=', orgId)
        .where('id', '=', id)
        .execute(),
    );
    return this.get(orgId, id);
  }

  async remove(orgId: number, id: number): Promise<Scenario> {
    const scenario = await this.get(orgId, id);
    await this.storage.db.deleteFrom('pipeline_scenarios').where('org_id', '=', orgId).where('id', '=', id).execute();
    return scenario;
  }

  async countInProject(orgId: number, projectId: number): Promise<number> {
    const { n } = await this.storage.db.selectFrom('pipeline_scenarios').select((eb) => eb.fn.countAll<number>().as('n')).where('org_id', '=', orgId).where('project_id', '=', projectId).executeTakeFirstOrThrow();
    return Number(n);
  }

  /** Ends the scenario's current debounce window of dataset_changed triggers: the next change opens another. */
  async nextTriggerWindow(orgId: number, id: number, db: Kysely<any> = this.storage.db): Promise<void> {
    await db
      .updateTable('pipeline_scenarios')
      .set((eb) => ({ trigger_seq: eb('trigger_seq', '+', 1) }))
      .where('org_id', '=', orgId)
      .where('id', '=', id)
      .execute();
  }

  /** Copies the scenario's steps onto its new run, all `pending`. */
  async addRunSteps(runId: number, steps: ScenarioStep[], db: Kysely<any>): Promise<void> {
    await db
      .insertInto('pipeline_scenario_steps')
      .values(steps.map((step, position) => ({ run_id: runId, position, name: step.name, type: step.type, params: this.storage.encodeJson(step.params), continue_on_failure: step.continue_on_failure, status: 'pending' })))
      .execute();
  }

  async runSteps(runId: number, db: Kysely<any> = this.storage.db): Promise<StepRun[]> {
    const rows = await db.selectFrom('pipeline_scenario_steps').selectAll().where('run_id', '=', runId).orderBy('position').execute();
    return rows.map((row) => ({
      id: Number(row.id),
      position: Number(row.position),
      name: row.name,
      type: row.type,
      params: this.storage.decodeJson<Record<string, unknown>>(row.params),
      continue_on_failure: Boolean(row.continue_on_failure),
      status: row.status as StepStatus,
      children_after: Number(row.children_after),
      started_at: row.started_at ?? null,
      ended_at: row.ended_at ?? null,
      output: row.output === null ? null : this.storage.decodeJson<Record<string, unknown>>(row.output),
      error: row.error ?? null,
    }));
  }

  /** Changes a step of a run unless it already ended (or is not in one of `from`); answers whether it changed. */
  async updateStep(stepId: number, from: StepStatus[], changes: Partial<{ status: StepStatus; children_after: number; started_at: string; ended_at: string; output: Record<string, unknown> | null; error: string | null }>, db: Kysely<any> = this.storage.db): Promise<boolean> {
    const { output, ...plain } = changes;
    const result = await db
      .updateTable('pipeline_scenario_steps')
      .set({ ...plain, ...(output !== undefined ? { output: output === null ? null : this.storage.encodeJson(output) } : {}) })
      .where('id', '=', stepId)
      .where('status', 'in', from)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  /**
   * Starts a pending step, noting the newest child run of the scenario run so far (the runs the
   * step starts come after it); answers that id, or null when the step was no longer pending.
   */
  async startStep(stepId: number, runId: number): Promise<number | null> {
    const row = await this.storage.db
      .updateTable('pipeline_scenario_steps')
      .set((eb) => ({
        status: 'running',
        started_at: this.storage.now(),
        children_after: eb.selectFrom('pipeline_runs').select((sub) => sub.fn.coalesce(sub.fn.max('id'), sub.lit(0)).as('newest')).where('parent_run_id', '=', runId),
      }))
      .where('id', '=', stepId)
      .where('status', '=', 'pending')
      .returning('children_after')
      .executeTakeFirst();
    return row ? Number(row.children_after) : null;
  }

  /** Ends every step of the run still pending or under way: those under way as `ended`, the others `skipped`. */
  async endOpenSteps(runId: number, ended: StepStatus, error: string, db: Kysely<any> = this.storage.db): Promise<void> {
    const now = this.storage.now();
    await db.updateTable('pipeline_scenario_steps').set({ status: ended, ended_at: now, error }).where('run_id', '=', runId).where('status', 'in', ['running', 'waiting']).execute();
    await db.updateTable('pipeline_scenario_steps').set({ status: 'skipped', ended_at: now }).where('run_id', '=', runId).where('status', '=', 'pending').execute();
  }

  private runAs(savedBy: Scenario['run_as']) {
    return { run_as: savedBy.userId, run_as_scopes: savedBy.scopes === null ? null : this.storage.encodeJson(savedBy.scopes) };
  }

  private encoded(fields: ScenarioFields) {
    return { steps: this.storage.encodeJson(fields.steps), triggers: this.storage.encodeJson(fields.triggers), reporters: this.storage.encodeJson(fields.reporters) };
  }

  /** A name taken in the project is a 409. */
  private async named<T>(fields: ScenarioFields, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (this.storage.isUniqueViolation(err)) throw problems.conflict(`a scenario named "${fields.name}" already exists in project ${fields.project_id}`);
      throw err;
    }
  }

  private decode(row: Record<string, any>): Scenario {
    return {
      id: Number(row.id),
      org_id: Number(row.org_id),
      project_id: Number(row.project_id),
      name: row.name,
      steps: this.storage.decodeJson<ScenarioStep[]>(row.steps),
      triggers: this.storage.decodeJson<ScenarioTrigger[]>(row.triggers),
      reporters: this.storage.decodeJson<ScenarioReporter[]>(row.reporters),
      run_as: { userId: Number(row.run_as), scopes: row.run_as_scopes === null ? null : this.storage.decodeJson<string[]>(row.run_as_scopes) },
      trigger_seq: Number(row.trigger_seq),
      created_at: row.created_at,
      updated_at: row.updated_at,
    };
  }
}
