import { z } from 'zod';
import { actingUserId, definePlugin, defineRoute, fieldErrorsOf, HttpProblem, identitySchemas as s, kernelServices, problems, reply, type DomainEvents, type Principal, type RequestAudit } from '../../kernel/plugin-api.ts';
import { QueryTimeoutError, quoteIdentifier, type Storage } from '../../storage/index.ts';
import { datasetCatalog, DATASET_DELETED, PII_MASK, ROW_POLICY_BYPASS, type DatasetCatalog, type DatasetDeletedEvent, type DatasetInfo } from '../datasets/public.ts';
import { evaluate, SAMPLE_ROWS, type Evaluation } from './evaluate.ts';
import { governedSql, type GovernedSql } from '../sql/public.ts';
import { qualityMigrations } from './migrations.ts';
import { QUALITY_RULE_FAILED, qualityRules, type QualityRuleFailedEvent, type QualityRules } from './public.ts';
import { RuleStore, type Rule, type RunScope, type StoredRun } from './rule-store.ts';
import { RULE_TYPES, ruleDefinition, type RuleDefinition } from './rule-types.ts';

const ruleSchema = z
  .object({
    id: z.number().int(),
    org_id: z.number().int(),
    dataset_id: z.number().int(),
    name: z.string(),
    type: z.enum(RULE_TYPES),
    params: z.record(z.string(), z.unknown()),
    severity: z.enum(['warn', 'error']),
    enabled: z.boolean(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'DataQualityRule' });

const runSchema = z
  .object({
    id: z.number().int(),
    org_id: z.number().int(),
    rule_id: z.number().int(),
    dataset_id: z.number().int(),
    dataset_version: z.number().int(),
    status: z.enum(['passed', 'failed', 'error']),
    severity: z.enum(['warn', 'error']),
    failing_rows: z.number().int().nullable().describe('null when the details are withheld'),
    observed: z.number().nullable(),
    message: z.string(),
    sample: z.array(z.record(z.string(), z.unknown())).describe('Up to 10 failing rows; PII columns masked; empty when the details are withheld'),
    details_withheld: z
      .boolean()
      .describe('true: the run was evaluated in another data scope than the caller\u2019s (other row policies, or PII the caller may not see), so failing_rows, observed, sample and message are withheld'),
    started_at: z.string(),
    duration_ms: z.number(),
  })
  .meta({ id: 'DataQualityRun' });

/** What a reader of another data scope gets in place of a kept run's message. */
const WITHHELD_MESSAGE =
  'details withheld: this run was evaluated in another data scope (other row policies, or PII you may not see); run the rule to see its details in yours';

/** The data scope of a caller reading kept runs. */
interface ReaderScope extends RunScope {
  /** Holds `datasets.policies.bypass`: sees every row of every dataset. */
  bypass: boolean;
}

/**
 * Whether a kept run was evaluated in the reader's own data scope: the same row-policy scope, and
 * PII only if the reader sees it too. A run of unknown scope (kept before scopes were recorded) may
 * have seen every row and PII: only a reader who bypasses row policies and sees PII shares it.
 */
function sharesScope(scope: RunScope | null, reader: ReaderScope): boolean {
  if (scope === null) return reader.bypass && reader.pii;
  return scope.key === reader.key && (reader.pii || !scope.pii);
}

/**
 * A kept run as a reader sees it: its details (failing rows, measure, sample, message — a database
 * error's text included) stay in the data scope it was evaluated in; other scopes get its status,
 * severity, timing and ids.
 */
function runAsSeenBy({ run, scope }: StoredRun, reader: ReaderScope) {
  if (sharesScope(scope, reader)) return { ...run, details_withheld: false };
  return { ...run, failing_rows: null, observed: null, sample: [], message: WITHHELD_MESSAGE, details_withheld: true };
}

/** A run as answered to the caller who ran it: everything, in their own scope. */
const runnersRun = ({ run }: StoredRun) => ({ ...run, details_withheld: false as const });

const ruleFields = {
  name: z.string().trim().min(1).max(200),
  type: z.enum(RULE_TYPES),
  params: z.record(z.string(), z.unknown()).describe('Per type: not_null/unique {column}; range {column, min?, max?}; pattern {column, pattern}; allowed_values {column, values}; row_count_between {min?, max?}; freshness {column?, max_age_hours}; custom_sql {condition}'),
  severity: z.enum(['warn', 'error']).default('error'),
  enabled: z.boolean().default(true),
};

/** What POST /rules takes (and `QualityRules.create`). */
const ruleInput = z.object({ dataset_id: s.recordId, ...ruleFields });

/** The capability a route would have asked of the caller, asked of a service's caller (a background run acts with its user's capabilities as of now). */
function requireCapability(principal: Principal, capability: string) {
  if (!principal.capabilities.has(capability)) throw problems.forbidden(`missing capability "${capability}"`);
}

const NUMERIC_OR_TIME = ['integer', 'number', 'date', 'timestamp'];


/**
 * A rule definition that fits the dataset: a 400/422 naming `body.params.<field>` otherwise. A rule
 * on a PII column needs `datasets.pii.read` (403), as a filter on one does: its failing-row count
 * would answer guesses about the hidden values one rule at a time.
 */
function checkDefinition(input: { type: string; params: unknown }, dataset: DatasetInfo, seesPii: boolean): RuleDefinition {
  const parsed = ruleDefinition.safeParse(input);
  if (!parsed.success) {
    const errors = fieldErrorsOf(parsed.error.issues, 'body');
    throw problems.badRequest(`invalid rule: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`, errors);
  }
  const definition = parsed.data;
  const name = 'column' in definition.params ? definition.params.column : undefined;
  if (name !== undefined) {
    const column = dataset.columns.find((c) => c.name === name);
    if (!column) throw problems.unprocessable(`dataset ${dataset.id} has no column "${name}"`, [{ path: 'body.params.column', message: 'no such column' }]);
    if (column.pii && !seesPii) throw problems.forbidden(`"${name}" is a PII column: a rule on it needs the capability "datasets.pii.read"`);
    if (definition.type === 'range' && !NUMERIC_OR_TIME.includes(column.type)) throw problems.unprocessable(`a range rule needs a numeric column; "${name}" is ${column.type}`, [{ path: 'body.params.column', message: 'not numeric' }]);
    if (definition.type === 'freshness' && column.type !== 'date' && column.type !== 'timestamp') throw problems.unprocessable(`a freshness rule needs a date or timestamp column; "${name}" is ${column.type}`, [{ path: 'body.params.column', message: 'not a date or timestamp' }]);
  }
  return definition;
}

/** The governed queries of a custom-SQL rule: rows where the condition does not hold (NULL included). */
const failingRowsSql = (dataset: DatasetInfo, condition: string, select: string) => `select ${select} from ${quoteIdentifier(dataset.name)} where (${condition}) is not true`;

class RuleRunner {
  constructor(
    private readonly storage: Storage,
    private readonly catalog: DatasetCatalog,
    private readonly rules: RuleStore,
    private readonly sql: GovernedSql,
    /** Time limit of a rule's queries (DATA_QUALITY_TIMEOUT_MS). */
    private readonly timeoutMs: number,
    private readonly events: DomainEvents,
  ) {}

  /**
   * A custom-SQL rule runs through the governed SQL path, as its caller: the same checks, masking,
   * row policies, time limit and audit as POST /api/sql.
   */
  async customSql(dataset: DatasetInfo, condition: string, principal: Principal, audit: RequestAudit): Promise<Evaluation> {
    const count = await this.sql.run({ sql: failingRowsSql(dataset, condition, 'count(*)'), timeout_ms: this.timeoutMs }, dataset.org_id, principal, audit);
    const failing = Number(count.rows[0][0]);
    const sample = failing ? await this.sql.run({ sql: failingRowsSql(dataset, condition, '*'), limit: SAMPLE_ROWS, timeout_ms: this.timeoutMs }, dataset.org_id, principal, audit) : null;
    const pii = new Set(dataset.columns.filter((c) => c.pii).map((c) => c.name));
    const rows = (sample?.rows ?? []).map((row) => Object.fromEntries(sample!.columns.map((c, i) => [c.name, pii.has(c.name) && row[i] !== null ? PII_MASK : row[i]])));
    return { status: failing ? 'failed' : 'passed', failing_rows: failing, sample: rows, message: failing ? `${failing} rows break the condition` : 'every row meets the condition', observed: null };
  }

  /** Runs a rule as its caller and keeps the run with the caller's data scope (null if it could not be told). */
  async run(rule: Rule, dataset: DatasetInfo, principal: Principal, audit: RequestAudit): Promise<StoredRun> {
    const startedAt = this.storage.now();
    const started = performance.now();
    let result;
    let scope: RunScope | null = null;
    try {
      const { condition, key } = await this.catalog.scope(principal, dataset);
      scope = { key, pii: this.catalog.seesPii(principal) };
      if (rule.type === 'custom_sql') {
        result = await this.customSql(dataset, (rule.params as { condition: string }).condition, principal, audit);
      } else {
        const definition = { type: rule.type, params: rule.params } as RuleDefinition;
        // A long read: off the event loop, within the organization's turns, stopped past the timeout.
        result = await evaluate(this.storage, this.storage.longReads(dataset.org_id, { timeoutMs: this.timeoutMs }), this.catalog, dataset, definition, condition);
      }
    } catch (err) {
      const message =
        err instanceof QueryTimeoutError
          ? `timed out: the rule's query ran longer than ${this.timeoutMs} ms (DATA_QUALITY_TIMEOUT_MS) and was stopped`
          : `the rule could not be evaluated: ${(err as Error).message}`;
      result = { status: 'error' as const, failing_rows: 0, sample: [], message, observed: null };
    }
    const durationMs = Math.round((performance.now() - started) * 100) / 100;
    // A rule of severity error that failed is published with its run, for who reacts (notifications).
    return this.storage.transaction(async (trx) => {
      const stored = await this.rules.recordRun(rule, dataset.version, result, scope, startedAt, durationMs, trx);
      const { run } = stored;
      if (run.status === 'failed' && rule.severity === 'error') {
        const payload: QualityRuleFailedEvent = { rule_id: rule.id, rule: rule.name, dataset_id: dataset.id, dataset: dataset.name, run_id: run.id, failing_rows: run.failing_rows, message: run.message, run_by: actingUserId(principal) };
        await this.events.publish({ type: QUALITY_RULE_FAILED, orgId: dataset.org_id, payload }, trx);
      }
      return stored;
    });
  }
}

/** Time limit of trying a condition or compiling a pattern when a rule is saved. */
const SAVE_CHECK_TIMEOUT_MS = 5_000;

/** A custom-SQL condition must be one the governed path accepts: tried once, the refusal named. */
async function checkCondition(sql: GovernedSql, dataset: DatasetInfo, condition: string, principal: Principal, audit: RequestAudit) {
  try {
    await sql.run({ sql: failingRowsSql(dataset, condition, 'count(*)'), limit: 1, timeout_ms: SAVE_CHECK_TIMEOUT_MS }, dataset.org_id, principal, audit);
  } catch (err) {
    // The condition's fault (a refusal, a time-out) names the field; anything else (a 503, a bug) passes on as it is.
    if (!(err instanceof HttpProblem) || err.status >= 500) throw err;
    throw problems.badRequest(`the condition is not usable: ${err.detail}`, [{ path: 'body.params.condition', message: err.detail }]);
  }
}

/**
 * A pattern the engine that runs it compiles (RE2 on SQLite, Postgres' POSIX flavour on Postgres),
 * asked of that engine: refused naming `body.params.pattern` otherwise.
 */
async function checkPattern(storage: Storage, pattern: string) {
  const error = await storage.dataTables.patternError(storage.db, pattern, SAVE_CHECK_TIMEOUT_MS);
  if (error !== null) throw problems.badRequest(`the pattern is not a regular expression the database can run: ${error}`, [{ path: 'body.params.pattern', message: error }]);
}

/** The `data_quality_rules` router (/api/data-quality): rules on datasets, runs and their history. */
export default definePlugin({
  deps: { storage: kernelServices.storage, config: kernelServices.config, events: kernelServices.events },
  migrations: qualityMigrations,
  init: ({ storage, config, events }, ctx) => {
    const catalog = ctx.useService(datasetCatalog);
    const sqlService = ctx.useService(governedSql);
    const rules = new RuleStore(storage);
    events.subscribe('dataset-deleted', {
      types: [DATASET_DELETED],
      handle: (event) => rules.removeForDataset(event.org_id!, (event.payload as DatasetDeletedEvent).dataset_id),
    });
    const runner = new RuleRunner(storage, catalog, rules, sqlService, config.DATA_QUALITY_TIMEOUT_MS, events);
    /** What only the database can tell about a definition: a condition or pattern it cannot run. */
    const checkRunnable = async (definition: RuleDefinition, dataset: DatasetInfo, principal: Principal, audit: RequestAudit) => {
      if (definition.type === 'custom_sql') await checkCondition(sqlService, dataset, definition.params.condition, principal, audit);
      if (definition.type === 'pattern') await checkPattern(storage, definition.params.pattern);
    };
    const service: QualityRules = {
      async create(orgId, principal, input, audit) {
        requireCapability(principal, 'datasets.write');
        const parsed = ruleInput.safeParse(input);
        if (!parsed.success) {
          const errors = fieldErrorsOf(parsed.error.issues, 'body');
          throw problems.badRequest(`invalid rule: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`, errors);
        }
        const body = parsed.data;
        const dataset = await catalog.get(orgId, body.dataset_id);
        const definition = checkDefinition(body, dataset, catalog.seesPii(principal));
        await checkRunnable(definition, dataset, principal, audit);
        const rule = await rules.create(orgId, { ...body, ...definition });
        await audit.record({ action: 'dq.rule.create', targetType: 'dq_rule', targetId: rule.id, details: { dataset_id: dataset.id, type: rule.type } });
        return rule;
      },
      list: (orgId, datasetId) => rules.list(orgId, datasetId),
      async run(orgId, ruleId, principal, audit) {
        requireCapability(principal, 'datasets.read');
        const rule = await rules.get(orgId, ruleId);
        return runnersRun(await runner.run(rule, await catalog.get(orgId, rule.dataset_id), principal, audit));
      },
      async remove(orgId, ruleId, audit) {
        await rules.remove(orgId, ruleId);
        await audit.record({ action: 'dq.rule.delete', targetType: 'dq_rule', targetId: ruleId });
      },
    };
    ctx.provideService(qualityRules, service);
    const base = { security: 'bearer', orgScoped: true } as const;
    const idParams = s.idParam('id');

    return {
      routes: [
        defineRoute({
          ...base,
          method: 'post',
          path: '/rules',
          summary: 'Create a rule on a dataset',
          description:
            'A rule checks a dataset column (not null, unique, range, pattern, accepted values, freshness, a row condition…), evaluated in the database when run. Parameters are checked for the rule\'s type (400); a column the dataset lacks or of the wrong type is a 422; a rule on a PII column needs `datasets.pii.read` (403).',
          capability: 'datasets.write',
          request: { body: ruleInput },
          responses: { 201: { description: 'The rule', schema: ruleSchema }, 422: { description: 'The column of the rule does not exist in the dataset or has the wrong type for the rule' } },
          handler: async ({ body, orgId, principal, audit }) => reply(201, await service.create(orgId, principal, body, audit)),
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/rules',
          summary: 'Rules of the organization, or of one dataset',
          description:
            'Every rule of the current organization, or only those of the dataset named by the `dataset_id` query parameter.',
          capability: 'datasets.read',
          request: { query: z.object({ dataset_id: s.pathId.optional() }) },
          responses: { 200: { description: 'Rules', schema: z.array(ruleSchema) } },
          handler: ({ query, orgId }) => rules.list(orgId, query.dataset_id),
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/rules/{id}',
          summary: 'One rule',
          description:
            'A rule of the current organization with its parameters, severity and whether it is enabled. A rule of another organization is a 404.',
          capability: 'datasets.read',
          request: { params: idParams },
          responses: { 200: { description: 'The rule', schema: ruleSchema } },
          handler: ({ params, orgId }) => rules.get(orgId, params.id),
        }),
        defineRoute({
          ...base,
          method: 'patch',
          path: '/rules/{id}',
          summary: 'Rename a rule, change its parameters, severity or enabled flag (its type stays)',
          description:
            'New parameters are checked as on creation (400, 422, 403 for a PII column). A rule\'s type never changes: create another rule instead.',
          capability: 'datasets.write',
          request: {
            params: idParams,
            body: z
              .object({ name: ruleFields.name.optional(), params: ruleFields.params.optional(), severity: z.enum(['warn', 'error']).optional(), enabled: z.boolean().optional() })
              .refine((b) => Object.keys(b).length > 0, 'give at least one field to change'),
          },
          responses: { 200: { description: 'The rule', schema: ruleSchema }, 422: { description: 'The column of the rule does not exist in the dataset or has the wrong type for the rule' } },
          handler: async ({ params, body, orgId, principal, audit }) => {
            const rule = await rules.get(orgId, params.id);
            if (body.params) {
              const dataset = await catalog.get(orgId, rule.dataset_id);
              const definition = checkDefinition({ type: rule.type, params: body.params }, dataset, catalog.seesPii(principal));
              await checkRunnable(definition, dataset, principal, audit);
            }
            const updated = await rules.update(orgId, rule.id, body);
            await audit.record({ action: 'dq.rule.update', targetType: 'dq_rule', targetId: rule.id, details: { changes: Object.keys(body) } });
            return updated;
          },
        }),
        defineRoute({
          ...base,
          method: 'delete',
          path: '/rules/{id}',
          summary: 'Delete a rule and its history',
          description:
            'Deletes the rule and every recorded run of it. Cannot be undone.',
          capability: 'datasets.write',
          request: { params: idParams },
          responses: { 204: { description: 'Deleted' } },
          handler: async ({ params, orgId, audit }) => {
            await service.remove(orgId, params.id, audit);
            return reply(204);
          },
        }),
        defineRoute({
          ...base,
          method: 'post',
          path: '/rules/{id}/run',
          summary: 'Run one rule now',
          description:
            'Evaluates the rule against the dataset\'s current rows in the database and records the run: passed or failed with the number of failing rows, or errored with the reason. Running a rule only reads the dataset, hence `datasets.read`.',
          capability: 'datasets.read',
          request: { params: idParams },
          responses: { 200: { description: 'The run', schema: runSchema } },
          handler: ({ params, orgId, principal, audit }) => service.run(orgId, params.id, principal, audit),
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/rules/{id}/runs',
          summary: 'Run history of a rule, newest first',
          description:
            'A run evaluated in another data scope than the caller\u2019s (other row policies, or PII the caller may not see) answers its status, severity, timing and ids only: `failing_rows` and `observed` null, `sample` empty, a fixed `message`, `details_withheld` true.',
          capability: 'datasets.read',
          request: { params: idParams, query: z.object({ limit: z.coerce.number().int().min(1).max(500).default(50) }) },
          responses: { 200: { description: 'Runs', schema: z.array(runSchema) } },
          handler: async ({ params, query, orgId, principal }) => {
            const rule = await rules.get(orgId, params.id);
            const dataset = await catalog.get(orgId, rule.dataset_id);
            const reader = { key: (await catalog.scope(principal, dataset)).key, pii: catalog.seesPii(principal), bypass: principal.capabilities.has(ROW_POLICY_BYPASS) };
            return (await rules.runs(orgId, rule.id, query.limit)).map((stored) => runAsSeenBy(stored, reader));
          },
        }),
        defineRoute({
          ...base,
          method: 'post',
          path: '/datasets/{id}/run',
          summary: 'Run every enabled rule of a dataset',
          description: '`status` is `failed` when an error-severity rule fails or errs, `warned` when only warn-severity rules fail, else `passed`.',
          capability: 'datasets.read',
          request: { params: idParams },
          responses: {
            200: {
              description: 'The runs',
              schema: z.object({ dataset_id: z.number().int(), status: z.enum(['passed', 'warned', 'failed']), runs: z.array(runSchema) }).meta({ id: 'DataQualityReport' }),
            },
          },
          handler: async ({ params, orgId, principal, audit }) => {
            const dataset = await catalog.get(orgId, params.id);
            const runs = [];
            for (const rule of (await rules.list(orgId, dataset.id)).filter((r) => r.enabled)) runs.push(runnersRun(await runner.run(rule, dataset, principal, audit)));
            const bad = runs.filter((r) => r.status !== 'passed');
            const status = bad.some((r) => r.severity === 'error') ? 'failed' : bad.length ? 'warned' : 'passed';
            await audit.record({ action: 'dq.dataset.run', targetType: 'dataset', targetId: dataset.id, details: { status, rules: runs.length } });
            return { dataset_id: dataset.id, status, runs };
          },
        }),
      ],
    };
  },
});
