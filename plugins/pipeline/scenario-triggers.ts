import { z, type BackgroundWork, type DomainEvents } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import { DATASET_UPDATED, type DatasetUpdatedEvent } from '../datasets/public.ts';
import type { ScenarioRunner } from './scenario-runner.ts';
import type { Scenario, ScenarioStore } from './scenario-store.ts';

const TRIGGER_WORK = 'scenario-trigger';


/**
 * `dataset_changed` triggers. Each `dataset.updated` event (durable: one published while no
 * instance ran is delivered afterwards) of a dataset a scenario watches enqueues the scenario's
 * trigger work `debounce_s` later, under a dedupe key naming the scenario's current window
 * (`trigger_seq`): every change until the work fires falls into the same window and enqueues
 * nothing more. The work starts the run and opens the next window in one transaction.
 */
export class ScenarioTriggers {
  constructor(
    private readonly storage: Storage,
    private readonly work: BackgroundWork,
    private readonly scenarios: ScenarioStore,
    private readonly runner: ScenarioRunner,
  ) {}

  register(events: DomainEvents): void {
    this.work.handle<{ scenario_id: number; window: number }>(TRIGGER_WORK, (context) => this.fire(context.orgId!, context.payload.scenario_id, context.payload.window), {
      payload: z.object({ scenario_id: z.number().int(), window: z.number().int() }),
      maxAttempts: 3,
    });
    events.subscribe('scenario-triggers', { types: [DATASET_UPDATED], handle: async (event) => this.changed(event.org_id!, (event.payload as DatasetUpdatedEvent).dataset_id) });
  }

  /** A dataset changed: each scenario watching it has its window's trigger work enqueued (once per window). */
  private async changed(orgId: number, datasetId: number): Promise<void> {
    for (const scenario of await this.scenarios.list(orgId)) {
      const trigger = scenario.triggers.find((t) => t.type === 'dataset_changed' && t.datasets.includes(datasetId));
      if (trigger?.type !== 'dataset_changed') continue;
      await this.work.enqueue(TRIGGER_WORK, {
        orgId,
        payload: { scenario_id: scenario.id, window: scenario.trigger_seq },
        runAfter: new Date(Date.now() + trigger.debounce_s * 1000),
        dedupeKey: `scenario-changed:${scenario.id}:${scenario.trigger_seq}`,
      });
    }
  }

  /** The window's time is up: a run starts for whoever last saved the scenario, and the next change opens a new window. */
  private async fire(orgId: number, scenarioId: number, window: number): Promise<void> {
    await this.storage.transaction(async (trx) => {
      await this.storage.lockForTransaction(trx, `pipeline-scenario-trigger:${scenarioId}`);
      const scenario = await this.scenarios.find(orgId, scenarioId, trx);
      // Deleted since, or this window already fired (an attempt retried after it committed).
      if (!scenario || scenario.trigger_seq !== window) return;
      await this.scenarios.nextTriggerWindow(orgId, scenarioId, trx);
      await this.runner.startIn(trx, scenario, scenario.run_as, 'dependency');
    });
  }
}
