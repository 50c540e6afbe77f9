import { definePlugin } from '../../kernel/plugin-api.ts';
import { pipelineScenarios } from '../pipeline/public.ts';
import { scheduleTargets } from '../scheduler/public.ts';

/** A schedule may target a scenario (`target: {scenario_id}`): each fire starts a run with trigger `schedule`. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const scenarios = ctx.useService(pipelineScenarios);
    ctx.contribute(scheduleTargets, {
      field: 'scenario_id',
      find: (orgId, id) => scenarios.find(orgId, id),
      async fire(orgId, id, principal, scheduleId, fireKey) {
        const run = await scenarios.start(orgId, id, principal, 'schedule', { schedule_id: scheduleId, idempotency_key: fireKey });
        return { run_id: run.id };
      },
    });
  },
});
