/**
 * The pipeline plugin's public contract: how a plugin contributes a recipe type, and the service
 * through which the pipeline's own code finds one (references and types only).
 */
import { z } from 'zod';
import type { RawBuilder } from 'kysely';
import { defineExtensionPoint, pluginServiceRef, type FieldError, type Principal, type RequestAudit, type RunPrincipal } from '../../kernel/plugin-api.ts';
import type { DataColumn, DataColumnType } from '../../storage/index.ts';

/** A JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1) as a plain object. */
export type JsonSchema = Record<string, unknown>;

/** A recipe input or output as a recipe type sees it. */
export interface RecipeDataset {
  id: number;
  name: string;
  columns: DataColumn[];
}

/** How an output column comes from the inputs: for column-level lineage. */
export type ColumnTransformation = 'identity' | 'renamed' | 'cast' | 'derived' | 'aggregated';
export interface ColumnOrigin {
  /** The input columns it is computed from (`input`: the index among the recipe's inputs). */
  from: { input: number; column: string }[];
  transformation: ColumnTransformation;
}

/**
 * One output of a planned recipe: a SELECT over the inputs, named by their dataset names (as a
 * query builder fragment, or as SQL text a user wrote, which is run as written).
 */
export interface PlannedOutput {
  select: RawBuilder<unknown> | string;
  /** The columns the SELECT answers, in order, each with where it comes from. */
  columns: (DataColumn & { origin: ColumnOrigin })[];
}

/** What a planner is given: the recipe's parameters and its datasets as they are now. */
export interface RecipePlanContext<P> {
  params: P;
  inputs: RecipeDataset[];
  /** How many outputs the recipe has. */
  outputs: number;
  /** A `column:operator:value` filter (the language of `GET …/rows`) on `input` as a condition; a bad one is a 400 naming `where`. */
  condition(input: RecipeDataset, filter: string, where: string): RawBuilder<boolean>;
  /** `expression` converted to a column type, as the database writes it. */
  cast(expression: RawBuilder<unknown>, type: DataColumnType): RawBuilder<unknown>;
  /**
   * The result columns of a SELECT over the inputs (governed: what `/api/sql` may read), without
   * running it; a statement the database refuses is a 400 naming `where` (e.g. `body.params.query`).
   */
  describe(select: RawBuilder<unknown> | string, where: string): Promise<DataColumn[]>;
}

/**
 * Plans a recipe as SQL run in the database (`INSERT … SELECT`, no row through Node): one SELECT
 * per output. A parameter that does not fit the inputs (an unknown column) is a 400 problem naming
 * it under `body.params`. Called when a recipe is saved (its check), asked its schema, and run.
 */
export type RecipePlanner<P = any> = (context: RecipePlanContext<P>) => PlannedOutput[] | Promise<PlannedOutput[]>;

/** What a recipe handler gets for one run, in a worker thread (see the README's plugin recipe types). */
export interface RecipeHandlerContext<P = any> {
  params: P;
  inputs: { dataset: RecipeDataset; rows(): AsyncIterable<Record<string, unknown>> }[];
  output: { columns(columns: DataColumn[]): void | Promise<void>; write(rows: Record<string, unknown>[]): Promise<void> };
  signal: AbortSignal;
  log: { info(message: string): void; warn(message: string): void; error(message: string): void };
  /**
   * Calls a function its type offers from the server's main thread (`calls`, a type from code):
   * the argument and the answer are copied between the threads; a throw there rejects here.
   */
  call(name: string, arg?: unknown): Promise<any>;
}

/** What a handler type's hooks are given: the recipe's organization, the caller (or the run's principal) and its inputs. */
export interface HandledRecipeScope<P = any> {
  orgId: number;
  /** The recipe's project (what a model call it makes counts against: project quotas, usage by project). */
  projectId: number;
  principal: Principal;
  params: P;
  inputs: RecipeDataset[];
  /** The run executing the recipe, when one is (its calls are traced under it). */
  runId?: number;
}

interface RecipeTypeFields {
  /** Unique across plugins: a second plugin contributing the same id fails to load. */
  id: string;
  description?: string;
  /** The JSON Schema of the parameters, compiled when the type is contributed. */
  params: JsonSchema;
  /** How many inputs a recipe of the type takes (default: at least 1, any number). */
  inputs?: { min: number; max?: number };
  /** How many outputs (default 1). */
  outputs?: number;
}

/** A recipe type run as SQL in the database (the built-in visual types and `sql`): from code only. */
export interface PlannedRecipeType<P = any> extends RecipeTypeFields {
  plan: RecipePlanner<P>;
}

/**
 * A recipe type whose handler streams rows in a worker thread: `handler` names `module:function`,
 * the module relative to the contributing plugin's folder (for a manifest without an entry module,
 * the manifest's folder).
 */
export interface HandledRecipeType<P = any> extends RecipeTypeFields {
  handler: string;
  /**
   * From code only: the output's columns the recipe will write, known from its definition (the
   * schema endpoint answers them before any run). A throw is a 4xx refusing the recipe when it is
   * saved (name the field: `body.params.model_id`, `body.inputs.0`).
   */
  describe?: (scope: HandledRecipeScope<P>) => Promise<DataColumn[]>;
  /** From code only: the functions the handler may call on the main thread (`ctx.call(name, arg)`), for one run. */
  calls?: (scope: HandledRecipeScope<P>) => Record<string, (arg: any) => Promise<unknown>>;
}

export type RecipeTypeContribution = PlannedRecipeType | HandledRecipeType;

/** A recipe type contributed from code, its planner typed by its parameters. */
export function recipeType<P>(type: PlannedRecipeType<P>): PlannedRecipeType<P>;
export function recipeType<P>(type: HandledRecipeType<P>): HandledRecipeType<P>;
export function recipeType(type: RecipeTypeContribution): RecipeTypeContribution {
  return type;
}

const contributionSchema = z
  .object({
    id: z.string().regex(/^[a-z][a-z0-9_.-]*$/, 'must be a lower-case identifier such as uppercase_column'),
    description: z.string().optional(),
    params: z.record(z.string(), z.unknown()).describe('JSON Schema of the recipe parameters'),
    inputs: z.object({ min: z.number().int().min(0), max: z.number().int().min(1).optional() }).strict().optional(),
    outputs: z.number().int().min(1).max(16).optional(),
    handler: z.string().regex(/^[^:]+:[A-Za-z_$][\w$]*$/, 'must be "module:function", module relative to the plugin folder').optional(),
    plan: z.custom<RecipePlanner>((value) => typeof value === 'function', 'must be a function').optional(),
    describe: z.custom<HandledRecipeType['describe']>((value) => typeof value === 'function', 'must be a function').optional(),
    calls: z.custom<HandledRecipeType['calls']>((value) => typeof value === 'function', 'must be a function').optional(),
  })
  .strict()
  .refine((type) => (type.handler === undefined) !== (type.plan === undefined), 'must have either plan (a function, from code) or handler ("module:function")')
  .refine((type) => type.handler !== undefined || (type.describe === undefined && type.calls === undefined), 'describe and calls belong to a handler type');

/**
 * The recipe types (spec §2.7): one per id, from code (`run`) or a manifest's `contributes`
 * (`handler`). The pipeline compiles `params` and resolves the handler when it accepts one: an
 * invalid JSON Schema or a handler that does not import as a function refuses the contribution.
 */
export const recipeTypes = defineExtensionPoint<RecipeTypeContribution>({
  id: 'pipeline.recipe-types',
  manifestKey: 'recipe_types',
  key: (type) => type.id,
  schema: contributionSchema,
});

/** A recipe type offered in an organization, its handler resolved and its parameters schema compiled. */
export interface OfferedRecipeType {
  id: string;
  pluginId: string;
  description: string | null;
  params: JsonSchema;
  inputs: { min: number; max: number | null };
  outputs: number;
  /** Set for a type run as SQL. */
  plan: RecipePlanner | null;
  /** Set for a type run by a handler in a worker thread: its module's absolute path and export, and its hooks (from code). */
  handler: { modulePath: string; exportName: string; describe: HandledRecipeType['describe'] | null; calls: HandledRecipeType['calls'] | null } | null;
  /** Where `params` fails the type's schema, as field errors under `location` (`body.params.field`); empty when valid. */
  check(params: unknown, location?: string): FieldError[];
}

export interface RecipeTypeCatalog {
  /** The types offered in the organization (null: every one): those whose plugin is enabled there, by id. */
  list(orgId: number | null): Promise<OfferedRecipeType[]>;
  /** The type if it is offered in the organization. */
  get(orgId: number, id: string): Promise<OfferedRecipeType | undefined>;
}

export const pipelineRecipeTypes = pluginServiceRef<RecipeTypeCatalog>('pipeline.recipe-types');

/** The pipeline's own kinds of run; other plugins contribute more (`pipeline.run-kinds`), so a run's kind is any of them. */
export const RUN_KINDS = ['recipe', 'job', 'scenario'] as const;
export type RunKind = string;
export type RunStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled' | 'skipped';
export type RunTrigger = 'manual' | 'api' | 'schedule' | 'scenario' | 'dependency';
export const RUN_STATUSES: RunStatus[] = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'skipped'];
export const RUN_TRIGGERS: RunTrigger[] = ['manual', 'api', 'schedule', 'scenario', 'dependency'];
export const BUILD_MODES = ['build', 'build_required', 'force'] as const;
export type BuildMode = (typeof BUILD_MODES)[number];

/** A run of a recipe, or of a build (a job's run, with one child run per recipe). */
export interface Run {
  id: number;
  kind: RunKind;
  status: RunStatus;
  trigger: RunTrigger;
  project_id: number;
  recipe_id: number | null;
  job_id: number | null;
  parent_run_id: number | null;
  /** The schedule whose fire started the run (null: not started by a schedule). */
  schedule_id: number | null;
  /** A scenario's run: the scenario (null otherwise). */
  scenario_id: number | null;
  /** A build's target datasets and mode (null for a recipe's run). */
  targets: number[] | null;
  mode: string | null;
  created_by: number | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  duration_ms: number | null;
  rows_written: number | null;
  /** How far a run that reports it has come (a contributed kind's, through `progress`): items done of the total. */
  progress: { done: number; total: number } | null;
  error: { title: string; detail: string } | null;
  /** The version of each input a recipe's run read (dataset id → version), once it succeeded. */
  input_versions: Record<string, number> | null;
}

/**
 * The durable event published in the transaction that ends a run (any kind: recipe, build, job,
 * scenario, a contributed kind): its outcome, for what reacts to runs (webhooks, notifications).
 */
export const RUN_FINISHED = 'run.finished';
export interface RunFinishedEvent {
  run_id: number;
  kind: RunKind;
  status: 'succeeded' | 'failed' | 'cancelled' | 'skipped';
  trigger: RunTrigger;
  project_id: number;
  recipe_id: number | null;
  job_id: number | null;
  scenario_id: number | null;
  parent_run_id: number | null;
  /** The user who started it (null: the platform, e.g. a schedule without an owner). */
  created_by: number | null;
  error: { title: string; detail: string } | null;
  started_at: string | null;
  ended_at: string | null;
  duration_ms: number | null;
}

export interface RunFilter {
  status?: RunStatus[];
  kind?: RunKind;
  trigger?: RunTrigger;
  project_id?: number;
  job_id?: number;
  recipe_id?: number;
  parent_run_id?: number;
  schedule_id?: number;
  scenario_id?: number;
  /** ISO-8601, on created_at: since inclusive, until exclusive. */
  since?: string;
  until?: string;
  limit: number;
  cursor?: string;
}

/** What a plugin starting a run may add: which schedule starts it, and a key making it start once. */
export interface RunStartOptions {
  /** The schedule whose fire starts the run (with trigger `schedule`). */
  schedule_id?: number | null;
  /**
   * At most one run per key in the organization: starting again with a key a run holds answers
   * that run, started nothing. A caller that may retry after its instance died (a schedule's fire)
   * passes the same key each time, so the retry never starts a second run.
   */
  idempotency_key?: string | null;
}

/** A build: the recipes producing `targets` and, by `mode`, those upstream (spec: jobs). */
export interface BuildRequest extends RunStartOptions {
  project_id: number;
  targets: number[];
  mode: BuildMode;
  trigger: RunTrigger;
  job_id?: number | null;
  /** The run of a scenario or other run this build belongs to. */
  parent_run_id?: number | null;
}

/**
 * Runs as other plugins start and read them (jobs, scenarios, schedules): each run is background
 * work of the kernel, started for `principal` (it runs with that user's capabilities).
 */
export interface PipelineRuns {
  runRecipe(orgId: number, recipeId: number, principal: Principal, trigger: RunTrigger, parentRunId?: number | null): Promise<Run>;
  build(orgId: number, request: BuildRequest, principal: Principal): Promise<Run>;
  get(orgId: number, id: number): Promise<Run>;
  list(orgId: number, filter: RunFilter): Promise<{ items: Run[]; next_cursor: string | null }>;
  cancel(orgId: number, id: number): Promise<Run>;
  /**
   * Starts a run of a kind a plugin contributed (`pipeline.run-kinds`), handed `payload` (JSON,
   * kept with the run's work so a restart resumes it): a 422 problem when the kind is not offered
   * in the organization.
   */
  start(orgId: number, request: { kind: string; project_id: number; trigger: RunTrigger; payload: unknown }, principal: Principal): Promise<Run>;
}

/** What a contributed kind's `execute` is given, for one attempt of one run. */
export interface RunKindContext<P = any> {
  orgId: number;
  run: Run;
  payload: P;
  /** Who the run acts for (its capabilities as of this attempt). */
  principal: RunPrincipal;
  /** Aborted when the run is cancelled, times out (RECIPE_TIMEOUT_S) or its attempt must stop. */
  signal: AbortSignal;
  /** A line of the run's log. */
  log(level: 'info' | 'warn' | 'error', message: string): void;
  /** Records how far the run has come, `done` items of `total`: the run's `progress`, for whoever watches it. */
  progress(done: number, total: number): Promise<void>;
}

/**
 * A kind of run another plugin contributes (a model's training): the pipeline keeps its status,
 * logs, cancellation and retries as for a recipe's run; `execute` does the work. It resolves when
 * the run succeeded; a throw fails the run with the error's message (a problem's detail).
 */
export interface RunKindContribution<P = any> {
  kind: string;
  description?: string;
  execute(context: RunKindContext<P>): Promise<void>;
}

/** Contributed kinds of run (checked: a lower-case kind none of the pipeline's own, an `execute` function). */
export const runKinds = defineExtensionPoint<RunKindContribution>({
  id: 'pipeline.run-kinds',
  key: (type) => type.kind,
  schema: z
    .object({
      kind: z
        .string()
        .regex(/^[a-z][a-z0-9_]*$/, 'must be a lower-case identifier such as training')
        .refine((kind) => !(RUN_KINDS as readonly string[]).includes(kind), 'is one of the pipeline\'s own kinds'),
      description: z.string().optional(),
      execute: z.custom<RunKindContribution['execute']>((value) => typeof value === 'function', 'must be a function'),
    })
    .strict(),
});

export const pipelineRuns = pluginServiceRef<PipelineRuns>('pipeline.runs');

/** A recipe as the graph and lineage see it. */
export interface RecipeSummary {
  id: number;
  project_id: number;
  name: string;
  type: string;
  inputs: number[];
  outputs: number[];
}

/**
 * The organization's recipes as a graph over datasets, with where each output column comes from:
 * for lineage and impact analysis.
 */
export interface PipelineGraph {
  recipes(orgId: number): Promise<RecipeSummary[]>;
  /**
   * The columns of each output of the recipe with their origins (indexes into `recipe.inputs`),
   * planned from its definition without running it; null for a handler type (unknown) or a recipe
   * that no longer plans (an input changed under it).
   */
  columnOrigins(orgId: number, recipeId: number): Promise<{ dataset_id: number; columns: { name: string; origin: ColumnOrigin }[] }[] | null>;
}

export const pipelineGraph = pluginServiceRef<PipelineGraph>('pipeline.graph');

/** What a recipe is saved with (the body of POST /api/pipeline/recipes). */
export interface RecipeDefinition {
  project_id: number;
  name: string;
  type: string;
  inputs: number[];
  outputs: number[];
  params: Record<string, unknown>;
}

/** A recipe as GET /api/pipeline/recipes/{id} answers it. */
export interface RecipeRecord extends RecipeDefinition {
  id: number;
  created_at: string;
  updated_at: string;
}

/**
 * Recipes written by other plugins (a dbt import) with exactly the checks of the
 * /api/pipeline/recipes routes, which call it: each problem a 4xx naming the field under `body`
 * (a SQL query the governed-SQL rules refuse: 400 `body.params.query`; an output another recipe
 * writes or a cycle: 409; a dataset not in the organization: 422). `principal` is who the checks
 * plan for (row policies, PII) and the author recorded. Auditing is the caller's business.
 */
export interface PipelineRecipes {
  create(orgId: number, fields: RecipeDefinition, principal: Principal): Promise<RecipeRecord>;
  /** Changes what is given (the project stays), checked as at creation. */
  update(orgId: number, id: number, changes: Partial<Omit<RecipeDefinition, 'project_id'>>, principal: Principal): Promise<RecipeRecord>;
  get(orgId: number, id: number): Promise<RecipeRecord>;
  list(orgId: number, filter?: { project_id?: number }): Promise<RecipeRecord[]>;
  remove(orgId: number, id: number): Promise<RecipeRecord>;
}

export const pipelineRecipes = pluginServiceRef<PipelineRecipes>('pipeline.recipes');

/** A run as the API answers it (for the routes of plugins that start runs: jobs, scenarios). */
export const runSchema = z
  .object({
    id: z.number().int(),
    kind: z.string().describe(`${RUN_KINDS.join(', ')}, or a kind another plugin contributes (training)`),
    status: z.enum(RUN_STATUSES as [RunStatus, ...RunStatus[]]),
    trigger: z.enum(RUN_TRIGGERS as [RunTrigger, ...RunTrigger[]]),
    project_id: z.number().int(),
    recipe_id: z.number().int().nullable(),
    job_id: z.number().int().nullable(),
    parent_run_id: z.number().int().nullable(),
    schedule_id: z.number().int().nullable().describe('The schedule whose fire started the run'),
    scenario_id: z.number().int().nullable().describe("A scenario's run: the scenario"),
    targets: z.array(z.number().int()).nullable().describe("A build's target datasets"),
    mode: z.string().nullable().describe("A build's mode"),
    created_by: z.number().int().nullable(),
    created_at: z.string(),
    started_at: z.string().nullable(),
    ended_at: z.string().nullable(),
    duration_ms: z.number().nullable(),
    rows_written: z.number().int().nullable(),
    progress: z
      .object({ done: z.number().int(), total: z.number().int() })
      .nullable()
      .describe('How far a run that reports it has come: items done of the total (a knowledge base\u2019s documents being indexed); null for one that does not'),
    error: z.object({ title: z.string(), detail: z.string() }).nullable(),
    input_versions: z.record(z.string(), z.number().int()).nullable().describe('The version of each input dataset (by id) a successful recipe run read'),
  })
  .meta({ id: 'PipelineRun' });

export const runAnswer = z.object({ run: runSchema }).meta({ id: 'PipelineRunStarted' });


/** A child run started by a step: the scenario run's children created since the step began, oldest first. */
export type StepChildRuns = () => Promise<Run[]>;

/** What a step type's `run` is given, for one step of one scenario run. */
export interface StepContext<P = any> {
  orgId: number;
  params: P;
  /** The scenario run the step belongs to. */
  run: { id: number; project_id: number; scenario_id: number; scenario: string };
  step: { position: number; name: string };
  /** Who the run acts for (its capabilities as of this attempt). */
  principal: RunPrincipal;
  /** The audit log as this run. */
  audit: RequestAudit;
  /** Aborted when the run is cancelled or its attempt must stop. */
  signal: AbortSignal;
  /**
   * The runs this step started before (children of the scenario run created since the step began):
   * a step resumed after a restart, or asked again after it answered `waiting`, finds its child run
   * here instead of starting another.
   */
  childRuns: StepChildRuns;
  /** A line of the scenario run's log. */
  log(level: 'info' | 'warn' | 'error', message: string): void;
  /**
   * Set when the step runs as a scenario's reporter rather than as one of its steps: what the
   * message is about, for a step type that sends one (`send_message`) to pass on as metadata.
   */
  report: ScenarioReport | null;
}

/** What a reporter says about an ended scenario run. */
export interface ScenarioReport {
  run_id: number;
  scenario: string;
  status: 'succeeded' | 'failed';
  failed_step: string | null;
  /** What the steps answered under `drift` (e.g. `check_schema_drift`), in step order. */
  drift: unknown[];
}

/**
 * A step's outcome: `succeeded` or `failed` with what it answers (`output`, a JSON object, kept on
 * the run; `error` says why it failed), or `waiting` for a child run it started: the step is asked
 * again (its `childRuns` holding that run) until it answers one of the others.
 */
export type StepResult = { status: 'succeeded' | 'failed'; output: Record<string, unknown>; error?: string } | { status: 'waiting'; output?: Record<string, unknown> };

/** A kind of scenario step (spec: scenarios): contributed to `pipeline.step-types`, from code. */
export interface StepTypeContribution<P = any> {
  /** Unique across plugins: a second plugin contributing the same id fails to load. */
  id: string;
  description?: string;
  /** The JSON Schema of the parameters, compiled when the type is contributed; a step's params are checked against it when the scenario is saved. */
  params: JsonSchema;
  /** Runs one step; a throw fails the step with the error's message (a problem's detail). */
  run(context: StepContext<P>): Promise<StepResult>;
}

/** A step type contributed from code, its `run` typed by its parameters. */
export function stepType<P>(type: StepTypeContribution<P>): StepTypeContribution<P> {
  return type;
}

/** The step types a scenario's steps name (checked: a lower-case id, a params schema, a `run` function). */
export const stepTypes = defineExtensionPoint<StepTypeContribution>({
  id: 'pipeline.step-types',
  key: (type) => type.id,
  schema: z
    .object({
      id: z.string().regex(/^[a-z][a-z0-9_.-]*$/, 'must be a lower-case identifier such as check_schema_drift'),
      description: z.string().optional(),
      params: z.record(z.string(), z.unknown()).describe('JSON Schema of the step parameters'),
      run: z.custom<StepTypeContribution['run']>((value) => typeof value === 'function', 'must be a function'),
    })
    .strict(),
});

/** A scenario as other plugins see it (the scheduler's `scenario_id` target). */
export interface ScenarioSummary {
  id: number;
  project_id: number;
  name: string;
}

/** Scenarios as other plugins find and start them. */
export interface PipelineScenarios {
  /** The scenario, or null when it is not one of the organization's. */
  find(orgId: number, id: number): Promise<ScenarioSummary | null>;
  /** Starts a run of the scenario acting as `principal` (a 404 problem for another organization's). */
  start(orgId: number, id: number, principal: Principal, trigger: RunTrigger, options?: RunStartOptions): Promise<Run>;
}

export const pipelineScenarios = pluginServiceRef<PipelineScenarios>('pipeline.scenarios');
