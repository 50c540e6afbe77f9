import { definePlugin, kernelServices, z } from '../../kernel/plugin-api.ts';
import { projectCatalog, projectDeleteGuards } from '../projects/public.ts';
import { FIRE_ATTEMPTS, FIRE_TIMEOUT_MS, FIRE_WORK, Firing, type FirePayload } from './firing.ts';
import { schedulerMigrations } from './migrations.ts';
import { scheduleTargets, type ScheduleTarget } from './public.ts';
import { scheduleRoutes } from './routes.ts';
import { ScheduleStore } from './schedule-store.ts';

/**
 * The `scheduler` router (/api/scheduler): schedules that run a target (a job, a scenario: kinds
 * other plugins contribute to `scheduler.targets`) at cron times in a time zone, each fire a
 * kernel work item (see firing.ts), with pause, resume, a preview and a fire history.
 */
export default definePlugin({
  deps: { storage: kernelServices.storage, work: kernelServices.work, enablement: kernelServices.pluginEnablement },
  migrations: schedulerMigrations,
  init: ({ storage, work, enablement }, ctx) => {
    const targets = new Map<string, { value: ScheduleTarget; pluginId: string }>();
    ctx.provideExtensionPoint(scheduleTargets, ({ value, pluginId }) => {
      const entry = { value, pluginId };
      targets.set(value.field, entry);
      return () => {
        if (targets.get(value.field) === entry) targets.delete(value.field);
      };
    });
    /** A target kind is offered where its plugin is enabled. */
    const targetOf = async (orgId: number, field: string) => {
      const entry = targets.get(field);
      return entry && (await enablement.isEnabled(entry.pluginId, orgId)) ? entry.value : undefined;
    };
    const targetFields = async (orgId: number) => {
      const offered = await Promise.all([...targets.keys()].map(async (field) => ((await targetOf(orgId, field)) ? field : null)));
      return offered.filter((field): field is string => field !== null).sort();
    };

    const store = new ScheduleStore(storage);
    const firing = new Firing(storage, store, work, targetOf, (orgId) => enablement.isEnabled(ctx.pluginId, orgId));
    work.handle<FirePayload>(FIRE_WORK, (context) => firing.fire(context), { payload: z.object({ schedule_id: z.number().int(), fire_at: z.string() }), timeoutMs: FIRE_TIMEOUT_MS, maxAttempts: FIRE_ATTEMPTS });
    work.handle('sweep', () => firing.sweep(), { timeoutMs: FIRE_TIMEOUT_MS });
    work.every('sweep', { cron: '*/5 * * * * *' });

    ctx.contribute(projectDeleteGuards, async (orgId, projectId) => {
      const count = await store.countInProject(orgId, projectId);
      return count ? `it holds ${count} schedule${count === 1 ? '' : 's'}; delete them first` : null;
    });

    return { routes: scheduleRoutes({ storage, store, firing, work, projects: ctx.useService(projectCatalog), targetOf, targetFields }) };
  },
});
