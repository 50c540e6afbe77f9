import type { Kysely } from 'kysely';
import { actingUser, HttpProblem, problems, WorkAborted, z, type BackgroundWork, type Principal, type RunPrincipal, type WorkContext } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { DatasetCatalog } from '../datasets/public.ts';
import { RecipeGraph } from './graph.ts';
import { RUN_KINDS, type BuildRequest, type PipelineRuns, type Run, type RunStatus, type RunTrigger } from './public.ts';
import type { RecipeExecution } from './recipe-execution.ts';
import type { RecipeStore } from './recipe-store.ts';
import type { RunKinds } from './run-kinds.ts';
import { FINAL_STATUSES, type RunStore } from './run-store.ts';
import type { ScenarioStore } from './scenario-store.ts';

const RECIPE_WORK = 'recipe';
const BUILD_WORK = 'build';
/** The work of a run of a kind another plugin contributed (`pipeline.run-kinds`). */
const CONTRIBUTED_WORK = 'contributed-run';
/** Beyond RECIPE_TIMEOUT_S, the time a run's work has to record its end (its statement or handler stops at the limit itself). */
const WORK_MARGIN_MS = 60_000;
/** Attempts of a recipe's work: a run cut short by its instance dying runs once more (its outputs were never half-written). */
const RECIPE_ATTEMPTS = 2;

/** Why a run failed, as its `error` says it. */
function errorOf(err: unknown, kind: string): { title: string; detail: string } {
  if (err instanceof HttpProblem) return { title: err.title, detail: err.detail ?? err.title };
  if (err instanceof WorkAborted && err.reason === 'timeout') return { title: 'Timed out', detail: err.message };
  const name = (err as Error)?.name;
  const failed = kind === 'recipe' ? 'Recipe failed' : 'Run failed';
  return { title: name === 'RecipeHandlerError' ? `Recipe handler failed (${(err as { reason: string }).reason})` : name === 'QueryTimeoutError' ? 'Timed out' : failed, detail: (err as Error)?.message ?? String(err) };
}

type RunLog = (level: 'info' | 'warn' | 'error', message: string) => void;
/** What an attempt's work answers: its success's log line and what the run keeps of it. */
type Outcome = { message: string; changes?: Parameters<RunStore['update']>[1] };

/**
 * Runs: each recipe's run is background work of the kernel (leased, so exactly one instance runs
 * it; cancellable; retried once when its instance died). A build is a run whose children are the
 * runs of its recipes: the build's work plans them, then each child, when it ends, starts the
 * children waiting only for finished ones, or skips those downstream of a failure.
 */
export class PipelineRunner implements PipelineRuns {
  constructor(
    private readonly storage: Storage,
    private readonly work: BackgroundWork,
    private readonly runs: RunStore,
    private readonly recipes: RecipeStore,
    private readonly execution: RecipeExecution,
    private readonly catalog: DatasetCatalog,
    /** The steps of scenario runs, ended with a cancelled or abandoned run. */
    private readonly scenarioSteps: ScenarioStore,
    /** RECIPE_TIMEOUT_S: how long one recipe run (or a contributed kind's) may take. */
    private readonly timeoutSeconds: number,
    private readonly kinds: RunKinds,
  ) {}

  /** Registers the work handlers (at the plugin's init). */
  register(): void {
    const payload = z.object({ run_id: z.number().int() });
    this.work.handle<{ run_id: number }>(RECIPE_WORK, (context) => this.executeRecipe(context), { payload, timeoutMs: this.timeoutSeconds * 1000 + WORK_MARGIN_MS, maxAttempts: RECIPE_ATTEMPTS });
    this.work.handle<{ run_id: number }>(BUILD_WORK, (context) => this.executeBuild(context), { payload, maxAttempts: 3 });
    this.work.handle<{ run_id: number; payload: unknown }>(CONTRIBUTED_WORK, (context) => this.executeContributed(context), {
      payload: z.object({ run_id: z.number().int(), payload: z.unknown() }),
      timeoutMs: this.timeoutSeconds * 1000 + WORK_MARGIN_MS,
      maxAttempts: RECIPE_ATTEMPTS,
    });
  }

  async start(orgId: number, request: { kind: string; project_id: number; trigger: RunTrigger; payload: unknown }, principal: Principal): Promise<Run> {
    if (!(await this.kinds.get(orgId, request.kind))) throw problems.unprocessable(`no run kind ${request.kind} is offered in this organization`);
    return this.storage.transaction(async (trx) => {
      const run = await this.runs.create(orgId, { kind: request.kind, trigger: request.trigger, project_id: request.project_id, created_by: actingUser(principal)?.userId ?? null }, trx);
      const item = await this.work.enqueue(CONTRIBUTED_WORK, { orgId, payload: { run_id: run.id, payload: request.payload }, onBehalfOf: principal }, trx);
      await this.runs.update(run.id, { work_id: item!.id }, trx);
      return run;
    });
  }

  async runRecipe(orgId: number, recipeId: number, principal: Principal, trigger: RunTrigger, parentRunId: number | null = null): Promise<Run> {
    const recipe = await this.recipes.get(orgId, recipeId);
    return this.storage.transaction(async (trx) => {
      const run = await this.runs.create(orgId, { kind: 'recipe', trigger, project_id: recipe.project_id, recipe_id: recipe.id, parent_run_id: parentRunId, created_by: actingUser(principal)?.userId ?? null }, trx);
      return this.enqueue(trx, RECIPE_WORK, orgId, run, principal);
    });
  }

  async build(orgId: number, request: BuildRequest, principal: Principal): Promise<Run> {
    return this.runs.createOnce(orgId, request.idempotency_key, async (trx) => {
      const run = await this.runs.create(
        orgId,
        {
          kind: 'job',
          trigger: request.trigger,
          project_id: request.project_id,
          job_id: request.job_id ?? null,
          parent_run_id: request.parent_run_id ?? null,
          schedule_id: request.schedule_id ?? null,
          targets: request.targets,
          mode: request.mode,
          created_by: actingUser(principal)?.userId ?? null,
          idempotency_key: request.idempotency_key,
        },
        trx,
      );
      return this.enqueue(trx, BUILD_WORK, orgId, run, principal);
    });
  }

  get(orgId: number, id: number): Promise<Run> {
    return this.runs.get(orgId, id);
  }

  /** A page of runs; a kind neither the pipeline's nor contributed is a 400 naming `query.kind`. */
  async list(orgId: number, filter: Parameters<RunStore['list']>[1]) {
    if (filter.kind && !(RUN_KINDS as readonly string[]).includes(filter.kind) && !(await this.kinds.known(filter.kind))) {
      throw problems.badRequest(`unknown run kind ${filter.kind}`, [{ path: 'query.kind', message: `unknown kind "${filter.kind}" (use ${RUN_KINDS.join(', ')} or a contributed kind)` }]);
    }
    return this.runs.list(orgId, filter);
  }

  /**
   * Cancels a run: a queued one ends `cancelled` at once; a running one is stopped (its statement
   * or handler) and ends `cancelled` when it has; a build's children are cancelled with it. A run
   * that already ended is a 409.
   */
  async cancel(orgId: number, id: number): Promise<Run> {
    const run = await this.runs.get(orgId, id);
    if (FINAL_STATUSES.includes(run.status)) throw problems.conflict(`run ${id} already ended (${run.status})`);
    await this.cancelTree(orgId, run);
    return this.runs.get(orgId, id);
  }

  /**
   * A recipe's run is stopped on its own; a build or a scenario ends `cancelled` at once (a
   * scenario's running step with it, its later steps skipped, its pass stopped), then each of its
   * children not ended is cancelled the same way (a scenario's build with its recipes' runs).
   */
  private async cancelTree(orgId: number, run: Run): Promise<void> {
    // A recipe's run and a contributed kind's stop in their work; builds and scenarios here.
    if (run.kind !== 'job' && run.kind !== 'scenario') return this.cancelOne(orgId, run);
    await this.finish(run.id, 'cancelled', { error: { title: 'Cancelled', detail: 'the run was cancelled' } });
    if (run.kind === 'scenario') {
      await this.scenarioSteps.endOpenSteps(run.id, 'cancelled', 'the run was cancelled');
      const workId = await this.workIdOf(run.id);
      if (workId !== null) await this.work.cancel(workId, orgId);
    }
    for (const child of await this.runs.children(orgId, run.id)) if (!FINAL_STATUSES.includes(child.status)) await this.cancelTree(orgId, child);
  }

  private async cancelOne(orgId: number, run: Run): Promise<void> {
    const workId = await this.workIdOf(run.id);
    const item = workId === null ? null : await this.work.cancel(workId, orgId);
    // Not started (or never enqueued: a build's child still waiting): it ends here. A running one ends in its handler.
    if (!item || item.status === 'cancelled') await this.finish(run.id, 'cancelled', { error: { title: 'Cancelled', detail: 'the run was cancelled' } });
  }

  private async workIdOf(runId: number, db: Kysely<any> = this.storage.db): Promise<number | null> {
    const row = await db.selectFrom('pipeline_runs').select('work_id').where('id', '=', runId).executeTakeFirstOrThrow();
    return row.work_id === null ? null : Number(row.work_id);
  }

  private async enqueue(db: Kysely<any>, name: string, orgId: number, run: Run, principal: Principal): Promise<Run> {
    const item = await this.work.enqueue(name, { orgId, payload: { run_id: run.id }, onBehalfOf: principal }, db);
    await this.runs.update(run.id, { work_id: item!.id }, db);
    return run;
  }

  /** The work of a recipe's run. Its outcome is the run's; the work item itself fails only when its instance must hand it back. */
  private async executeRecipe(context: WorkContext<{ run_id: number }>): Promise<void> {
    const orgId = context.orgId!;
    const run = await this.runs.get(orgId, context.payload.run_id);
    if (FINAL_STATUSES.includes(run.status)) return;
    await this.attempt(context, run, async (principal, log) => {
      if (!principal.capabilities.has('pipeline.run')) throw problems.forbidden(`${principal.onBehalfOf.username} may not run recipes any more (capability "pipeline.run")`);
      const recipe = await this.recipes.get(orgId, run.recipe_id!);
      const result = await this.execution.run(recipe, { principal, runId: run.id, signal: context.signal, timeoutMs: this.timeoutSeconds * 1000, log });
      return { message: `succeeded: ${result.rows} rows written`, changes: { rows_written: result.rows, input_versions: result.inputVersions } };
    });
    if (run.parent_run_id !== null) await this.advance(orgId, run.parent_run_id, context.principal);
  }

  /** The work of a contributed kind's run: its kind's `execute`, its outcome the run's as for a recipe's. */
  private async executeContributed(context: WorkContext<{ run_id: number; payload: unknown }>): Promise<void> {
    const orgId = context.orgId!;
    const run = await this.runs.get(orgId, context.payload.run_id);
    if (FINAL_STATUSES.includes(run.status)) return;
    await this.attempt(context, run, async (principal, log) => {
      const kind = await this.kinds.get(orgId, run.kind);
      if (!kind) throw problems.unprocessable(`no run kind ${run.kind} is offered in this organization any more`);
      const progress = async (done: number, total: number) => void (await this.runs.update(run.id, { progress_done: done, progress_total: total }));
      await kind.execute({ orgId, run, payload: context.payload.payload, principal, signal: context.signal, log, progress });
      return { message: 'succeeded' };
    });
  }

  /**
   * One attempt at a run: marks it running, does `work` and ends the run with its outcome:
   * succeeded, cancelled, timed out or failed. A run handed back (its plugin reloading, its instance
   * stopping) or taken over is left to the next attempt: the throw goes on to the kernel.
   */
  private async attempt(context: WorkContext<unknown>, run: Run, work: (principal: RunPrincipal, log: RunLog) => Promise<Outcome>): Promise<void> {
    // Lines are written one after another, in the order they were logged, before the run ends.
    let logged = Promise.resolve();
    const log: RunLog = (level, message) => void (logged = logged.then(() => this.runs.log(run.id, level, message)).catch(() => undefined));
    if (context.item.attempts > 1) log('warn', `attempt ${context.item.attempts}: the instance running the previous attempt stopped before it ended; running again`);
    await this.runs.update(run.id, { status: 'running', started_at: this.storage.now() });
    try {
      if (!context.principal) throw problems.forbidden('the run has nobody to act for');
      const outcome = await work(context.principal, log);
      log('info', outcome.message);
      await logged;
      await this.finish(run.id, 'succeeded', outcome.changes);
    } catch (err) {
      const aborted = context.signal.aborted ? (context.signal.reason as WorkAborted) : null;
      if (aborted && (aborted.reason === 'released' || aborted.reason === 'lost')) throw err;
      if (aborted?.reason === 'cancelled') {
        log('warn', run.kind === 'recipe' ? 'cancelled: every output is as it was' : 'cancelled');
        await logged;
        await this.finish(run.id, 'cancelled', { error: { title: 'Cancelled', detail: 'the run was cancelled' } });
      } else {
        const error = aborted?.reason === 'timeout' ? { title: 'Timed out', detail: `the run took longer than RECIPE_TIMEOUT_S (${this.timeoutSeconds} s)` } : errorOf(err, run.kind);
        log('error', `failed: ${error.detail}`);
        await logged;
        await this.finish(run.id, 'failed', { error });
      }
    }
  }

  /** Ends a run unless it already ended; answers whether it did. */
  private async finish(runId: number, status: RunStatus, changes: Parameters<RunStore['update']>[1] = {}, db: Kysely<any> = this.storage.db): Promise<boolean> {
    return this.runs.update(runId, { ...changes, status, ended_at: this.storage.now() }, db);
  }

  /** The work of a build: plans its recipes as child runs, then starts those with nothing to wait for. */
  private async executeBuild(context: WorkContext<{ run_id: number }>): Promise<void> {
    const orgId = context.orgId!;
    const run = await this.runs.get(orgId, context.payload.run_id);
    if (FINAL_STATUSES.includes(run.status)) return;
    const graph = await RecipeGraph.load(this.storage.db, orgId);
    const planned = graph.buildPlan(run.targets ?? [], run.mode === 'build');
    const needed = run.mode === 'build_required' ? await this.outOfDate(orgId, graph, planned, run.targets ?? []) : new Set(planned.keys());
    await this.storage.transaction(async (trx) => {
      await this.storage.lockForTransaction(trx, `pipeline-build:${run.id}`);
      // A retried build (its instance died after planning) plans nothing twice.
      if ((await this.runs.children(orgId, run.id, trx)).length) return;
      await this.runs.update(run.id, { status: 'running', started_at: this.storage.now() }, trx);
      await this.createChildren(trx, orgId, run, graph, planned, needed);
    });
    await this.advance(orgId, run.id, context.principal);
  }

  /**
   * The child runs of a build: every recipe of the plan, each waiting for the runs of the recipes
   * that feed it; those not `needed` end at once, skipped as up to date.
   */
  private async createChildren(trx: Kysely<any>, orgId: number, build: Run, graph: RecipeGraph, planned: Map<number, number[]>, needed: Set<number>): Promise<void> {
    const runOf = new Map<number, number>();
    // Parents first, so each child knows the run ids it waits for.
    for (const recipeId of topological(planned)) {
      const waitsFor = planned.get(recipeId)!.map((parent) => runOf.get(parent)!);
      const upToDate = !needed.has(recipeId);
      const child = await this.runs.create(
        orgId,
        { kind: 'recipe', trigger: 'dependency', project_id: graph.recipes.get(recipeId)!.project_id, recipe_id: recipeId, parent_run_id: build.id, waits_for: waitsFor, created_by: build.created_by, ...(upToDate ? { status: 'skipped' as const } : {}) },
        trx,
      );
      if (upToDate) await this.runs.log(child.id, 'info', 'skipped: its inputs have not changed since its last successful run', trx);
      runOf.set(recipeId, child.id);
    }
    if (planned.size === 0) await this.runs.log(build.id, 'info', 'no recipe produces the targets: nothing to build', trx);
  }

  /**
   * The recipes of a `build_required` plan that must run: those producing the targets, those that
   * never succeeded, those whose inputs changed version since their last success (as make compares
   * file times), and everything downstream of one that runs.
   */
  private async outOfDate(orgId: number, graph: RecipeGraph, planned: Map<number, number[]>, targets: number[]): Promise<Set<number>> {
    const needed = new Set<number>(targets.map((d) => graph.producerOf(d)).filter((r): r is number => r !== undefined));
    for (const recipeId of topological(planned)) {
      if (planned.get(recipeId)!.some((parent) => needed.has(parent))) needed.add(recipeId);
      if (needed.has(recipeId)) continue;
      const last = await this.runs.lastSuccess(orgId, recipeId);
      if (!last) {
        needed.add(recipeId);
        continue;
      }
      for (const input of graph.recipes.get(recipeId)!.inputs) {
        const version = await Promise.resolve(this.catalog.get(orgId, input)).then((d) => d.version, () => null);
        if (version === null || last[String(input)] !== version) needed.add(recipeId);
      }
    }
    return needed;
  }

  /**
   * Moves a build on: starts each queued child whose parents all succeeded (or were up to date),
   * skips those downstream of a failure, and ends the build once every child has ended. Builds
   * advance one at a time (a lock per build): two children ending together never start a third twice.
   */
  private async advance(orgId: number, buildId: number, principal: Principal | null): Promise<void> {
    await this.storage.transaction(async (trx) => {
      await this.storage.lockForTransaction(trx, `pipeline-build:${buildId}`);
      const build = await this.runs.get(orgId, buildId, trx);
      const children = await this.runs.children(orgId, buildId, trx);
      const waits = await this.runs.waits(orgId, buildId, trx);
      const byId = new Map(children.map((c) => [c.id, c]));
      const satisfied = (c: Run) => c.status === 'succeeded' || (c.status === 'skipped' && c.error === null);
      const blocked = (c: Run) => ['failed', 'cancelled'].includes(c.status) || (c.status === 'skipped' && c.error !== null);
      // In plan order: a child skipped here blocks its own children in the same pass.
      for (const child of children) {
        if (child.status !== 'queued' || (await this.workIdOf(child.id, trx)) !== null) continue;
        const parents = (waits.get(child.id) ?? []).map((id) => byId.get(id)!);
        const failedParent = parents.find(blocked);
        if (build.status === 'cancelled' || failedParent) {
          const error = build.status === 'cancelled' ? { title: 'Cancelled', detail: 'the build was cancelled' } : { title: 'Skipped', detail: `an upstream recipe's run (${failedParent!.id}) did not succeed` };
          await this.finish(child.id, build.status === 'cancelled' ? 'cancelled' : 'skipped', { error }, trx);
          byId.set(child.id, { ...child, status: build.status === 'cancelled' ? 'cancelled' : 'skipped', error });
        } else if (parents.every(satisfied) && principal) {
          // Started for whom the build runs (the run that just ended acts for them); without one
          // (a sweep settling an abandoned run), the next child to end starts it.
          await this.enqueue(trx, RECIPE_WORK, orgId, child, principal);
        }
      }
      const all = [...byId.values()];
      if (all.every((c) => FINAL_STATUSES.includes(c.status)) && !FINAL_STATUSES.includes(build.status)) {
        const status: RunStatus = all.some((c) => c.status === 'failed') ? 'failed' : 'succeeded';
        const rows = all.reduce((sum, c) => sum + (c.rows_written ?? 0), 0);
        const failed = all.filter((c) => c.status === 'failed').length;
        await this.finish(buildId, status, { rows_written: rows, ...(status === 'failed' ? { error: { title: 'Build failed', detail: `${failed} of ${all.length} recipe runs failed` } } : {}) }, trx);
      }
    });
  }

  /**
   * Settles runs whose work ended without them: an instance killed twice mid-run (the kernel ended
   * the work `lost`), or a cancel of work that never started. Any instance may run it; a run ends once.
   */
  async settleAbandoned(): Promise<void> {
    for (const run of await this.runs.unfinished(500)) {
      if (run.work_id === null) continue;
      const item = await this.work.get(run.work_id);
      if (!item || item.status === 'queued' || item.status === 'running') continue;
      if (run.kind === 'job' && item.status === 'succeeded') continue; // planned; its children end it
      const status: RunStatus = item.status === 'cancelled' ? 'cancelled' : 'failed';
      const detail = item.reason === 'lost' ? 'the instance running it stopped (killed or crashed) twice; its outputs are as they were' : (item.error ?? `its work ended ${item.status}`);
      if (await this.finish(run.id, status, { error: { title: status === 'cancelled' ? 'Cancelled' : 'Interrupted', detail } })) {
        if (run.kind === 'scenario') await this.scenarioSteps.endOpenSteps(run.id, status, detail);
        const full = await this.runs.get(run.org_id, run.id);
        if (full.parent_run_id !== null) await this.advance(run.org_id, full.parent_run_id, null);
      }
    }
  }
}

/** The recipes of a plan, each after those it waits for. */
function topological(plan: Map<number, number[]>): number[] {
  const order: number[] = [];
  const placed = new Set<number>();
  const visit = (id: number) => {
    if (placed.has(id)) return;
    placed.add(id);
    for (const parent of plan.get(id) ?? []) visit(parent);
    order.push(id);
  };
  for (const id of [...plan.keys()].sort((a, b) => a - b)) visit(id);
  return order;
}
