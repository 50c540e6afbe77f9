import type { Kysely } from 'kysely';
import { actingUserId, HttpProblem, problems, WorkAborted, z, type BackgroundWork, type Principal, type RunPrincipal, type StoredActor, type WorkContext } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { PipelineScenarios, Run, RunStartOptions, RunTrigger, ScenarioReport, StepContext, StepResult } from './public.ts';
import { FINAL_STATUSES, type RunStore } from './run-store.ts';
import type { StepStatus } from './scenario-schemas.ts';
import type { Scenario, ScenarioStore, StepRun } from './scenario-store.ts';
import type { StepTypes } from './step-types.ts';

const SCENARIO_WORK = 'scenario';
const ENDED_STEPS: StepStatus[] = ['succeeded', 'failed', 'skipped', 'cancelled'];
/** How soon a step waiting for a child run is asked again: doubling from the first, up to the last. */
const WAIT_FIRST_MS = 100;
const WAIT_MAX_MS = 2_000;
/** Attempts of a pass: one cut short by its instance dying resumes at the step it was running. */
const PASS_ATTEMPTS = 3;

interface PassPayload {
  run_id: number;
  /** The step being waited for and how many times it answered `waiting` (for the next delay). */
  step: number;
  waits: number;
}

/**
 * Scenario runs: each is worked through in passes, each pass background work of the kernel
 * (leased: one instance at a time; retried when its instance died). A pass runs the steps in order
 * from the first that has not ended; a step that answers `waiting` (for a child build) ends the
 * pass, and the next pass, enqueued with it a moment later, asks the step again. No work item is
 * held while a build runs, so scenarios never take the worker slots their builds need.
 */
export class ScenarioRunner implements PipelineScenarios {
  constructor(
    private readonly storage: Storage,
    private readonly work: BackgroundWork,
    private readonly runs: RunStore,
    private readonly scenarios: ScenarioStore,
    private readonly stepTypes: StepTypes,
  ) {}

  register(): void {
    const payload = z.object({ run_id: z.number().int(), step: z.number().int().default(0), waits: z.number().int().min(0).default(0) });
    this.work.handle<PassPayload>(SCENARIO_WORK, (context) => this.pass(context), { payload, maxAttempts: PASS_ATTEMPTS });
  }

  async find(orgId: number, id: number) {
    const scenario = await this.scenarios.find(orgId, id);
    return scenario ? { id: scenario.id, project_id: scenario.project_id, name: scenario.name } : null;
  }

  async start(orgId: number, id: number, principal: Principal, trigger: RunTrigger, options: RunStartOptions = {}): Promise<Run> {
    return this.runs.createOnce(orgId, options.idempotency_key, async (trx) => this.startIn(trx, await this.scenarios.get(orgId, id, trx), principal, trigger, options));
  }

  /** Creates the run with its steps copied from the scenario, and its first pass, in `trx`. */
  async startIn(trx: Kysely<any>, scenario: Scenario, principal: Principal | StoredActor, trigger: RunTrigger, options: RunStartOptions = {}): Promise<Run> {
    const run = await this.runs.create(
      scenario.org_id,
      { kind: 'scenario', trigger, project_id: scenario.project_id, scenario_id: scenario.id, schedule_id: options.schedule_id ?? null, idempotency_key: options.idempotency_key, created_by: actingUserId(principal) },
      trx,
    );
    await this.scenarios.addRunSteps(run.id, scenario.steps, trx);
    await this.enqueuePass(trx, scenario.org_id, { run_id: run.id, step: 0, waits: 0 }, principal);
    return run;
  }

  private async enqueuePass(db: Kysely<any>, orgId: number, payload: PassPayload, principal: Principal | StoredActor, runAfter?: Date): Promise<void> {
    const item = await this.work.enqueue(SCENARIO_WORK, { orgId, payload, onBehalfOf: principal, runAfter }, db);
    await this.runs.update(payload.run_id, { work_id: item!.id }, db);
  }

  /** One pass over a scenario run: its steps from the first not ended, until one waits or every one has ended. */
  private async pass(context: WorkContext<PassPayload>): Promise<void> {
    const orgId = context.orgId!;
    const run = await this.runs.get(orgId, context.payload.run_id);
    if (FINAL_STATUSES.includes(run.status)) return;
    // Lines are written one after another, in the order they were logged.
    let logged = Promise.resolve();
    const log = (level: 'info' | 'warn' | 'error', message: string) => void (logged = logged.then(() => this.runs.log(run.id, level, message)).catch(() => undefined));
    if (context.item.attempts > 1) log('warn', `attempt ${context.item.attempts}: the instance running the previous attempt stopped; resuming at the step it was running`);
    if (run.status === 'queued') await this.runs.update(run.id, { status: 'running', started_at: this.storage.now() });
    const principal = context.principal;
    const refusal = !principal ? 'the run has nobody to act for' : !principal.capabilities.has('pipeline.run') ? `${principal.onBehalfOf.username} may not run scenarios any more (capability "pipeline.run")` : null;
    if (refusal || !principal) {
      const detail = refusal ?? 'the run has nobody to act for';
      await this.scenarios.endOpenSteps(run.id, 'failed', detail);
      await logged;
      await this.finish(run.id, 'failed', { title: 'Forbidden', detail });
      return;
    }
    const scenarioName = (await this.scenarios.find(orgId, run.scenario_id!))?.name ?? `scenario ${run.scenario_id}`;
    for (const step of await this.scenarios.runSteps(run.id)) {
      if (ENDED_STEPS.includes(step.status)) continue;
      const outcome = await this.runStep(context, principal, run, scenarioName, step, log);
      if (outcome === 'stopped') return void (await logged);
      if (outcome === 'waiting') {
        const waits = context.payload.step === step.position ? context.payload.waits + 1 : 1;
        const delay = Math.min(WAIT_MAX_MS, WAIT_FIRST_MS * 2 ** (waits - 1));
        await this.storage.transaction((trx) => this.enqueuePass(trx, orgId, { run_id: run.id, step: step.position, waits }, principal, new Date(Date.now() + delay)));
        return void (await logged);
      }
      if (outcome === 'failed' && !step.continue_on_failure) {
        await this.scenarios.endOpenSteps(run.id, 'skipped', `step ${step.position} "${step.name}" failed`);
        break;
      }
    }
    const steps = await this.scenarios.runSteps(run.id);
    const stopper = steps.find((s) => s.status === 'failed' && !s.continue_on_failure) ?? null;
    const status = stopper ? 'failed' : 'succeeded';
    const report: ScenarioReport = { run_id: run.id, scenario: scenarioName, status, failed_step: stopper?.name ?? null, drift: steps.flatMap((s) => (Array.isArray(s.output?.drift) ? s.output.drift : [])) };
    await this.report(context, principal, run, report, log);
    log(status === 'failed' ? 'error' : 'info', stopper ? `failed at step ${stopper.position} "${stopper.name}" (${stopper.type}): ${stopper.error}` : `succeeded: ${steps.length} steps`);
    await logged;
    await this.finish(run.id, status, stopper ? { title: 'Step failed', detail: `step ${stopper.position} "${stopper.name}" (${stopper.type}) failed: ${stopper.error ?? 'no reason given'}` } : null);
  }

  /**
   * Runs one step (again, when it was running or waiting): answers how it ended, `waiting`, or
   * `stopped` (the run was cancelled under it). A throw of the step type fails the step; an attempt
   * handed back (its instance or plugin stopping) throws, and the next attempt runs the step again.
   */
  private async runStep(context: WorkContext<PassPayload>, principal: RunPrincipal, run: Run, scenarioName: string, step: StepRun, log: StepContext['log']): Promise<'succeeded' | 'failed' | 'waiting' | 'stopped'> {
    const orgId = context.orgId!;
    if (step.status === 'pending') {
      const started = await this.scenarios.startStep(step.id, run.id);
      if (started === null) return 'stopped';
      step = { ...step, children_after: started };
    }
    let result: StepResult;
    try {
      const type = await this.stepTypes.get(orgId, step.type);
      if (!type) throw new Error(`step type "${step.type}" is not offered in this organization (unknown, or its plugin is disabled here)`);
      const errors = type.check(step.params, 'params');
      if (errors.length) throw new Error(`params do not match the step type: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`);
      result = await type.run(this.stepContext(context, principal, run, scenarioName, step, log, null));
    } catch (err) {
      const aborted = context.signal.aborted ? (context.signal.reason as WorkAborted) : null;
      if (aborted && (aborted.reason === 'released' || aborted.reason === 'lost')) throw err;
      if (aborted?.reason === 'cancelled') return 'stopped';
      result = { status: 'failed', output: {}, error: aborted?.reason === 'timeout' ? 'the step ran out of time' : err instanceof HttpProblem ? err.detail : ((err as Error)?.message ?? String(err)) };
    }
    if (result.status === 'waiting') {
      return (await this.scenarios.updateStep(step.id, ['running', 'waiting'], { status: 'waiting', output: result.output ?? null })) ? 'waiting' : 'stopped';
    }
    const error = result.status === 'failed' ? (result.error ?? 'the step failed') : null;
    if (!(await this.scenarios.updateStep(step.id, ['running', 'waiting'], { status: result.status, ended_at: this.storage.now(), output: result.output, error }))) return 'stopped';
    log(result.status === 'failed' ? 'error' : 'info', `step ${step.position} "${step.name}" ${result.status}${error ? `: ${error}` : ''}`);
    return result.status;
  }

  private stepContext(context: WorkContext<PassPayload>, principal: RunPrincipal, run: Run, scenarioName: string, step: Pick<StepRun, 'position' | 'name' | 'params' | 'children_after'>, log: StepContext['log'], report: ScenarioReport | null): StepContext {
    const orgId = context.orgId!;
    return {
      orgId,
      params: step.params,
      run: { id: run.id, project_id: run.project_id, scenario_id: run.scenario_id!, scenario: scenarioName },
      step: { position: step.position, name: step.name },
      principal,
      audit: context.audit,
      signal: context.signal,
      childRuns: async () => (report ? [] : (await this.runs.children(orgId, run.id)).filter((child) => child.id > step.children_after)),
      log,
      report,
    };
  }

  /**
   * The scenario's reporters whose `on` matches: each posts its message through the `send_message`
   * step type (a connector action) with the report as metadata. A reporter that fails is logged; it
   * changes nothing of the run's outcome.
   */
  private async report(context: WorkContext<PassPayload>, principal: RunPrincipal, run: Run, report: ScenarioReport, log: StepContext['log']): Promise<void> {
    const scenario = await this.scenarios.find(context.orgId!, run.scenario_id!);
    const due = (scenario?.reporters ?? []).filter((r) => r.on === 'always' || (r.on === 'failure') === (report.status === 'failed'));
    if (!due.length) return;
    const sender = await this.stepTypes.get(context.orgId!, 'send_message');
    for (const [i, reporter] of due.entries()) {
      if (!sender) {
        log('warn', `reporter ${i}: the step type send_message is not offered here; nothing was sent`);
        continue;
      }
      const step = { position: -1, name: `reporter ${i}`, params: { connector_id: reporter.connector_id, message: reporter.message }, children_after: 0 };
      try {
        const result = await sender.run(this.stepContext(context, principal, run, report.scenario, step, log, report));
        log(result.status === 'failed' ? 'warn' : 'info', `reporter ${i} (connector ${reporter.connector_id}): ${result.status === 'failed' ? `not sent: ${result.error}` : 'sent'}`);
      } catch (err) {
        log('warn', `reporter ${i} (connector ${reporter.connector_id}): not sent: ${(err as Error)?.message ?? String(err)}`);
      }
    }
  }

  private finish(runId: number, status: 'succeeded' | 'failed', error: { title: string; detail: string } | null): Promise<boolean> {
    return this.runs.update(runId, { status, ended_at: this.storage.now(), ...(error ? { error } : {}) });
  }
}
