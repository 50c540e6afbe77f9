import type { Kysely } from 'kysely';
import { problems } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { Evaluation } from './evaluate.ts';
import type { RuleDefinition } from './rule-types.ts';

export interface Rule {
  id: number;
  org_id: number;
  dataset_id: number;
  name: string;
  type: RuleDefinition['type'];
  params: RuleDefinition['params'];
  severity: 'warn' | 'error';
  enabled: boolean;
  created_at: string;
  updated_at: string;
}

export interface Run extends Evaluation {
  id: number;
  rule_id: number;
  dataset_id: number;
  dataset_version: number;
  severity: 'warn' | 'error';
  started_at: string;
  duration_ms: number;
}

/**
 * The data scope a run was evaluated in: the runner's row-policy scope key
 * (`DatasetCatalog.scope(…).key`) and whether the runner saw PII values.
 */
export interface RunScope {
  key: string;
  pii: boolean;
}

/** A kept run and the scope it was evaluated in (null: unknown, e.g. kept before scopes were recorded). */
export interface StoredRun {
  run: Run;
  scope: RunScope | null;
}

/** Rules and their run history, one organization at a time. */
export class RuleStore {
  constructor(private readonly storage: Storage) {}

  private rule = (row: Record<string, unknown>): Rule => ({ ...(row as unknown as Rule), params: this.storage.decodeJson(row.params), enabled: Boolean(row.enabled) });
  private run = ({ scope_key, saw_pii, ...row }: Record<string, unknown>): StoredRun => ({
    run: { ...(row as unknown as Run), sample: this.storage.decodeJson(row.sample), failing_rows: Number(row.failing_rows), observed: row.observed === null ? null : Number(row.observed) },
    scope: typeof scope_key === 'string' && saw_pii !== null && saw_pii !== undefined ? { key: scope_key, pii: Boolean(saw_pii) } : null,
  });

  async create(orgId: number, input: { dataset_id: number; name: string; severity: 'warn' | 'error'; enabled: boolean } & RuleDefinition): Promise<Rule> {
    const now = this.storage.now();
    const row = await this.storage.db
      .insertInto('dq_rules')
      .values({ org_id: orgId, dataset_id: input.dataset_id, name: input.name, type: input.type, params: this.storage.encodeJson(input.params), severity: input.severity, enabled: input.enabled, created_at: now, updated_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
    return this.rule(row);
  }

  async list(orgId: number, datasetId?: number): Promise<Rule[]> {
    let query = this.storage.db.selectFrom('dq_rules').selectAll().where('org_id', '=', orgId);
    if (datasetId !== undefined) query = query.where('dataset_id', '=', datasetId);
    return (await query.orderBy('id').execute()).map(this.rule);
  }

  async get(orgId: number, id: number): Promise<Rule> {
    const row = await this.storage.db.selectFrom('dq_rules').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (!row) throw problems.notFound(`no data-quality rule ${id} in this organization`);
    return this.rule(row);
  }

  async update(orgId: number, id: number, changes: Partial<Pick<Rule, 'name' | 'severity' | 'enabled'>> & { params?: unknown }): Promise<Rule> {
    await this.get(orgId, id);
    const { params, ...fields } = changes;
    await this.storage.db
      .updateTable('dq_rules')
      .set({ ...fields, ...(params !== undefined ? { params: this.storage.encodeJson(params) } : {}), updated_at: this.storage.now() })
      .where('org_id', '=', orgId)
      .where('id', '=', id)
      .execute();
    return this.get(orgId, id);
  }

  /** Every rule of a dataset, with its runs (they cascade). */
  async removeForDataset(orgId: number, datasetId: number): Promise<void> {
    await this.storage.db.deleteFrom('dq_rules').where('org_id', '=', orgId).where('dataset_id', '=', datasetId).execute();
  }

  async remove(orgId: number, id: number): Promise<void> {
    await this.get(orgId, id);
    await this.storage.db.deleteFrom('dq_rules').where('org_id', '=', orgId).where('id', '=', id).execute();
  }

  async recordRun(rule: Rule, datasetVersion: number, result: Evaluation, scope: RunScope | null, startedAt: string, durationMs: number, db: Kysely<any> = this.storage.db): Promise<StoredRun> {
    const row = await db
      .insertInto('dq_runs')
      .values({
        rule_id: rule.id,
        org_id: rule.org_id,
        dataset_id: rule.dataset_id,
        dataset_version: datasetVersion,
        status: result.status,
        severity: rule.severity,
        failing_rows: result.failing_rows,
        observed: result.observed,
        message: result.message,
        sample: this.storage.encodeJson(result.sample),
        scope_key: scope?.key ?? null,
        saw_pii: scope?.pii ?? null,
        started_at: startedAt,
        duration_ms: durationMs,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return this.run(row);
  }

  async runs(orgId: number, ruleId: number, limit: number): Promise<StoredRun[]> {
    return (await this.storage.db.selectFrom('dq_runs').selectAll().where('org_id', '=', orgId).where('rule_id', '=', ruleId).orderBy('id', 'desc').limit(limit).execute()).map(this.run);
  }
}
