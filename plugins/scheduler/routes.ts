import type { Kysely } from 'kysely';
import { defineRoute, identitySchemas as s, problems, reply, storedActorOf, z, type BackgroundWork, type RouteDefinition } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { ProjectCatalog } from '../projects/public.ts';
import { checkTiming, fireTimes, wallClock } from './cron.ts';
import { Superseded, type Firing } from './firing.ts';
import type { ScheduleTarget } from './public.ts';
import { CATCH_UP, type Schedule, type ScheduleFields, type ScheduleStore } from './schedule-store.ts';

const noControlCharacters = /^[^\u0000-\u001f\u007f]*$/;

/** A schedule's fields as a caller gives them (no defaults: a change leaves what it does not name). */
const scheduleFields = z.object({
  project_id: s.recordId,
  name: z.string().trim().min(1).max(200).regex(noControlCharacters, 'must not hold control characters'),
  target: z
    .record(z.string().max(64), s.recordId)
    .describe('What each fire runs: exactly one field, of a kind a plugin contributes (`job_id`, `scenario_id`), e.g. {"job_id": 3}'),
  cron: z.string().min(1).max(200).regex(noControlCharacters, 'must not hold control characters').describe('5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first; read in `timezone`'),
  timezone: z.string().min(1).max(64).regex(/^[A-Za-z0-9_+\-/]+$/, 'must be an IANA time zone name such as Europe/Paris').describe('IANA time zone name (default UTC)'),
  enabled: z.boolean().describe('default true'),
  catch_up: z.enum(CATCH_UP).describe('After a time passed while no instance could fire it: `skip` (default) fires nothing for the missed times, `run_once` fires once for them; both then resume'),
});

const scheduleInput = scheduleFields.extend({ timezone: scheduleFields.shape.timezone.default('UTC'), enabled: scheduleFields.shape.enabled.default(true), catch_up: scheduleFields.shape.catch_up.default('skip') });

const scheduleSchema = z
  .object({
    id: z.number().int(),
    project_id: z.number().int(),
    name: z.string(),
    target: z.record(z.string(), z.number().int()),
    cron: z.string(),
    timezone: z.string(),
    enabled: z.boolean(),
    catch_up: z.enum(CATCH_UP),
    next_run_at: z.string().nullable().describe('When it fires next; null while paused or disabled'),
    disabled_reason: z.string().nullable().describe('Why the scheduler disabled it (its target was deleted, its owner may no longer act); null otherwise'),
    owner_id: z.number().int().describe('The user its fires act for: whoever last created, changed or resumed it'),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Schedule' });

const fireSchema = z
  .object({
    id: z.number().int(),
    fire_at: z.string().describe('The time it was due'),
    started_at: z.string(),
    outcome: z.enum(['firing', 'fired', 'failed', 'missed', 'target_missing']).describe('`fired`: a run started (`run_id`); `failed`: it could not start one (`error`); `missed`: no instance ran it on time and catch_up is skip; `target_missing`: the target was gone, the schedule was disabled; `firing`: starting now'),
    run_id: z.number().int().nullable(),
    error: z.string().nullable(),
  })
  .meta({ id: 'ScheduleFire' });

const publicSchedule = (schedule: Schedule) => ({
  id: schedule.id,
  project_id: schedule.project_id,
  name: schedule.name,
  target: { [schedule.target_field]: schedule.target_id },
  cron: schedule.cron,
  timezone: schedule.timezone,
  enabled: schedule.enabled,
  catch_up: schedule.catch_up,
  next_run_at: schedule.next_run_at,
  disabled_reason: schedule.disabled_reason,
  owner_id: schedule.owner_id,
  created_at: schedule.created_at,
  updated_at: schedule.updated_at,
});

/** Whoever saves a schedule owns it: its fires act for them, narrowed to their token's scopes. */

export interface RouteDeps {
  storage: Storage;
  store: ScheduleStore;
  firing: Firing;
  work: BackgroundWork;
  projects: ProjectCatalog;
  targetOf(orgId: number, field: string): Promise<ScheduleTarget | undefined>;
  /** The target fields offered in the organization, for messages. */
  targetFields(orgId: number): Promise<string[]>;
}

const base = { security: 'bearer', orgScoped: true } as const;
const idParams = s.idParam('id');
const changed = 'The schedule changed under this request; try again';

/** The routes of /api/scheduler. */
export function scheduleRoutes({ storage, store, firing, work, projects, targetOf, targetFields }: RouteDeps): RouteDefinition<any>[] {
  /** The one target field and id of a `target`, contributed here and existing in the project: a 400 or 422 naming `body.target…` otherwise. */
  async function checkTarget(orgId: number, projectId: number, target: Record<string, number>): Promise<{ target_field: string; target_id: number }> {
    const offered = await targetFields(orgId);
    const entries = Object.entries(target);
    if (entries.length !== 1) throw problems.badRequest(`a target names exactly one of: ${offered.join(', ')}`, [{ path: 'body.target', message: `give exactly one of ${offered.join(', ')}` }]);
    const [[field, id]] = entries;
    const kind = await targetOf(orgId, field);
    if (!kind) throw problems.badRequest(`"${field}" is not a kind of schedule target here (offered: ${offered.join(', ')})`, [{ path: `body.target.${field}`, message: 'unknown target kind' }]);
    const found = await kind.find(orgId, id);
    if (!found) throw problems.unprocessable(`${field} ${id} does not exist in this organization`, [{ path: `body.target.${field}`, message: 'no such target' }]);
    if (found.project_id !== projectId) throw problems.unprocessable(`${field} ${id} belongs to project ${found.project_id}, not ${projectId}`, [{ path: `body.target.${field}`, message: `not in project ${projectId}` }]);
    return { target_field: field, target_id: id };
  }

  /** Applies a change and arms the schedule's new generation when it is enabled; the old pending fire is cancelled. */
  async function save(orgId: number, write: (trx: Kysely<any>) => Promise<{ schedule: Schedule; dropped: number | null }>): Promise<Schedule> {
    let dropped: number | null = null;
    const id = await storage
      .transaction(async (trx) => {
        const result = await write(trx);
        dropped = result.dropped;
        if (result.schedule.enabled) await firing.arm(result.schedule, new Date(), null, trx);
        return result.schedule.id;
      })
      .catch((err) => {
        if (err instanceof Superseded) throw problems.conflict(changed);
        throw err;
      });
    // Only cleanup: a fire of an older generation does nothing when it runs.
    if (dropped !== null) await work.cancel(dropped, orgId);
    return store.get(orgId, id);
  }

  return [
    defineRoute({
      ...base,
      method: 'post',
      path: '/schedules',
      summary: 'Create a schedule',
      description:
        'Runs a target (a job, a scenario) at the times a cron expression names in a time zone, acting as the user who saves it. A bad expression or zone is a 400 naming `body.cron` or `body.timezone`; a target of an unknown kind is a 400 naming it, one that does not exist here or belongs to another project a 422.',
      capability: 'scheduler.write',
      request: { body: scheduleInput },
      responses: {
        201: { description: 'Created', schema: scheduleSchema },
        409: { description: 'A schedule of that name exists in the project' },
        422: { description: 'The project or the target does not exist here, or the target is in another project' },
      },
      handler: async ({ body, orgId, principal, audit }) => {
        const timing = checkTiming(body);
        if (!(await projects.exists(orgId, body.project_id))) throw problems.unprocessable(`project ${body.project_id} does not exist in this organization`, [{ path: 'body.project_id', message: 'no such project' }]);
        const fields: ScheduleFields = { project_id: body.project_id, name: body.name, ...(await checkTarget(orgId, body.project_id, body.target)), ...timing, enabled: body.enabled, catch_up: body.catch_up };
        const schedule = await save(orgId, async (trx) => ({ schedule: await store.create(orgId, fields, storedActorOf(principal), trx), dropped: null }));
        await audit.record({ action: 'scheduler.schedule.create', targetType: 'schedule', targetId: schedule.id, details: { name: schedule.name, cron: schedule.cron, timezone: schedule.timezone } });
        return reply(201, publicSchedule(schedule));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/schedules',
      summary: 'List schedules',
      description: 'The schedules of this organization, of one project with `project_id`.',
      capability: 'scheduler.read',
      request: { query: z.object({ project_id: s.pathId.optional() }) },
      responses: { 200: { description: 'Schedules', schema: z.object({ items: z.array(scheduleSchema) }) } },
      handler: async ({ query, orgId }) => ({ items: (await store.list(orgId, query.project_id)).map(publicSchedule) }),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/schedules/{id}',
      summary: 'Get a schedule',
      description: 'One schedule of this organization, with when it fires next.',
      capability: 'scheduler.read',
      request: { params: idParams },
      responses: { 200: { description: 'The schedule', schema: scheduleSchema } },
      handler: async ({ params, orgId }) => publicSchedule(await store.get(orgId, params.id)),
    }),
    defineRoute({
      ...base,
      method: 'patch',
      path: '/schedules/{id}',
      summary: 'Change a schedule',
      description: 'Changes its name, target, timing, `enabled` or `catch_up` (its project stays: `project_id` is refused). The caller becomes its owner; its next fire is computed again from now.',
      capability: 'scheduler.write',
      request: { params: idParams, body: scheduleFields.omit({ project_id: true }).partial().strict().refine((b) => Object.keys(b).length > 0, 'give at least one field to change') },
      responses: {
        200: { description: 'The schedule', schema: scheduleSchema },
        409: { description: 'A schedule of that name exists in the project, or the schedule changed under this request' },
        422: { description: 'The target does not exist here, or is in another project' },
      },
      handler: async ({ params, body, orgId, principal, audit }) => {
        const current = await store.get(orgId, params.id);
        const timing = checkTiming({ cron: body.cron ?? current.cron, timezone: body.timezone ?? current.timezone });
        const target = body.target ? await checkTarget(orgId, current.project_id, body.target) : {};
        const enabled = body.enabled ?? current.enabled;
        const changes = { ...(body.name !== undefined ? { name: body.name } : {}), ...target, ...timing, enabled, ...(body.catch_up ? { catch_up: body.catch_up } : {}), ...(enabled ? { disabled_reason: null } : {}), owner: storedActorOf(principal) };
        const schedule = await save(orgId, (trx) => store.change(orgId, current.id, changes, trx));
        await audit.record({ action: 'scheduler.schedule.update', targetType: 'schedule', targetId: schedule.id, details: { changes: Object.keys(body) } });
        return publicSchedule(schedule);
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/schedules/{id}',
      summary: 'Delete a schedule',
      description: 'Deletes the schedule and its fire history; its pending fire is cancelled. The runs it started stay.',
      capability: 'scheduler.write',
      request: { params: idParams },
      responses: { 204: { description: 'Deleted' } },
      handler: async ({ params, orgId, audit }) => {
        const schedule = await store.remove(orgId, params.id);
        if (schedule.pending_work_id !== null) await work.cancel(schedule.pending_work_id, orgId);
        await audit.record({ action: 'scheduler.schedule.delete', targetType: 'schedule', targetId: schedule.id, details: { name: schedule.name } });
        return reply(204);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/schedules/{id}/pause',
      summary: 'Pause a schedule',
      description: 'It fires no more (its pending fire is cancelled) until resumed. Pausing a paused schedule changes nothing.',
      capability: 'scheduler.write',
      request: { params: idParams },
      responses: { 200: { description: 'The schedule', schema: scheduleSchema }, 409: { description: 'The schedule changed under this request' } },
      handler: async ({ params, orgId, audit }) => {
        const current = await store.get(orgId, params.id);
        if (!current.enabled) return publicSchedule(current);
        const schedule = await save(orgId, (trx) => store.change(orgId, current.id, { enabled: false }, trx));
        await audit.record({ action: 'scheduler.schedule.pause', targetType: 'schedule', targetId: schedule.id });
        return publicSchedule(schedule);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/schedules/{id}/resume',
      summary: 'Resume a schedule',
      description: 'A paused or disabled schedule fires again from its next time after now (the times it was paused are not made up). The caller becomes its owner. Resuming an enabled schedule changes nothing.',
      capability: 'scheduler.write',
      request: { params: idParams },
      responses: { 200: { description: 'The schedule', schema: scheduleSchema }, 409: { description: 'The schedule changed under this request' }, 422: { description: 'Its target does not exist any more' } },
      handler: async ({ params, orgId, principal, audit }) => {
        const current = await store.get(orgId, params.id);
        if (current.enabled) return publicSchedule(current);
        const kind = await targetOf(orgId, current.target_field);
        if (!kind || !(await kind.find(orgId, current.target_id))) throw problems.unprocessable(`its target (${current.target_field} ${current.target_id}) does not exist any more: change the target first`);
        const schedule = await save(orgId, (trx) => store.change(orgId, current.id, { enabled: true, disabled_reason: null, owner: storedActorOf(principal) }, trx));
        await audit.record({ action: 'scheduler.schedule.resume', targetType: 'schedule', targetId: schedule.id });
        return publicSchedule(schedule);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/schedules/{id}/preview',
      summary: 'The next fire times of a schedule',
      description:
        'The next `count` times its cron expression names after `from` (default now), paused or not: each as a UTC instant (`at`) and as the wall clock of its time zone reads it (`local`, with the offset then). Across a daylight-saving change, a time the spring-forward day skips comes one hour later, and a time the fall-back day repeats comes once.',
      capability: 'scheduler.read',
      request: {
        params: idParams,
        query: z.object({
          count: z.coerce.number().int().min(1).max(100).default(5),
          from: z.iso.datetime({ offset: true }).optional().describe('ISO-8601 instant to count from (default now)'),
        }),
      },
      responses: { 200: { description: 'Fire times', schema: z.object({ timezone: z.string(), times: z.array(z.object({ at: z.string(), local: z.string() })) }).meta({ id: 'SchedulePreview' }) } },
      handler: async ({ params, query, orgId }) => {
        const schedule = await store.get(orgId, params.id);
        const from = query.from ? new Date(query.from) : new Date();
        return { timezone: schedule.timezone, times: fireTimes(schedule, from, query.count).map((at) => ({ at: at.toISOString(), local: wallClock(at, schedule.timezone) })) };
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/schedules/{id}/fires',
      summary: 'Fire history of a schedule',
      description: 'Its fires, newest first: each due time, what came of it and the run it started.',
      capability: 'scheduler.read',
      request: { params: idParams, query: z.object({ limit: z.coerce.number().int().min(1).max(500).default(50) }) },
      responses: { 200: { description: 'Fires', schema: z.object({ items: z.array(fireSchema) }) } },
      handler: async ({ params, query, orgId }) => {
        const schedule = await store.get(orgId, params.id);
        return { items: (await store.fires(orgId, schedule.id, query.limit)).map(({ schedule_id: _s, ...fire }) => fire) };
      },
    }),
  ];
}
