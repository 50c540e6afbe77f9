import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratchDatabase, DIALECTS, REPO_ROOT, tempDir, until, writeManifest } from '../harness/index.ts';
import { client, databaseQuery, exited, killAll, launch, serverSettings, type ServerProcess } from '../harness/server-process.ts';

/**
 * A schedule's fire outlives the instance running it: killed (SIGKILL) after the fire was recorded
 * and the next one armed, before or after its run was created, the fire is finished after the
 * restart with exactly one run; so is one whose work ran out of attempts long ago (the sweep hands
 * it on). The target is test/fixtures/plugins/crashing-schedule-target: it builds a job like the
 * jobs plugin's target, asking twice at once with the fire's key, and kills its own process where
 * a marker file says.
 */

type Fire = { id: number; fire_at: string; outcome: string; run_id: number | null; error: string | null };

describe.each(DIALECTS)('a schedule fire whose server process is killed (%s)', (dialect) => {
  const temp = tempDir('dp-fire-crash-');
  const markers = path.join(temp.dir, 'markers');
  const live: ServerProcess[] = [];
  let database: Awaited<ReturnType<typeof createScratchDatabase>>;
  let query: ReturnType<typeof databaseQuery>;
  let env: Record<string, string>;
  let token: string;
  let server: ServerProcess;
  let api: ReturnType<typeof client>;
  let project: number;
  let dataset: number;
  let jobs = 0;

  const restart = async () => {
    server = await launch(env, live);
    api = client(server.url, token);
  };
  /** A server to talk to, whatever a failed test before left. */
  const serving = async () => {
    if (exited(server)) await restart();
  };
  /** Has the fixture kill the server at `marker` ('before-run', 'after-run') of the next fire. */
  const arm = (marker: string) => fs.writeFileSync(path.join(markers, marker), '');
  const killedByFire = async () => {
    const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error(`the fire did not kill the server:\n${server.output()}`)), 20_000).unref());
    await Promise.race([server.gone, timeout]);
  };
  /** A schedule of a new job firing once, about 2 s from now (the next time is a year later). */
  const scheduleOnce = async () => {
    const job = await api('POST', '/api/pipeline/jobs', { project_id: project, name: `job ${++jobs}`, targets: [dataset] });
    expect(job.status, JSON.stringify(job.body)).toBe(201);
    const at = new Date(Math.ceil((Date.now() + 2_500) / 1000) * 1000);
    const cron = `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} ${at.getUTCDate()} ${at.getUTCMonth() + 1} *`;
    const created = await api('POST', '/api/scheduler/schedules', { project_id: project, name: `once ${jobs}`, target: { crashing_job_id: job.body.id }, cron, timezone: 'UTC' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.next_run_at).toBe(at.toISOString());
    return { id: created.body.id as number, job: job.body.id as number, fireAt: at.toISOString() };
  };
  const firesOf = async (id: number) => (await api('GET', `/api/scheduler/schedules/${id}/fires`)).body.items as Fire[];
  const ended = (id: number) => until(() => firesOf(id), (fires) => fires.length > 0 && fires.every((f) => f.outcome !== 'firing'), 30_000);
  const runsOf = async (id: number) => (await api('GET', `/api/pipeline/runs?schedule_id=${id}`)).body.items as Record<string, any>[];
  /** What the kill left, read in the database: the fire recorded `firing`, and the runs of the schedule. */
  const leftBehind = async (id: number) => ({
    fires: await query<{ outcome: string; run_id: number | null }>('select outcome, run_id from scheduler_fires where schedule_id = $1', [id]),
    runs: Number((await query<{ n: number }>('select count(*) as n from pipeline_runs where schedule_id = $1', [id]))[0].n),
  });
  /** The schedule fired once, at its time, with exactly one run: a build of its job with trigger `schedule`. */
  const firedOnce = async (schedule: { id: number; job: number; fireAt: string }) => {
    const fires = await ended(schedule.id);
    expect(fires, JSON.stringify(fires)).toEqual([expect.objectContaining({ fire_at: schedule.fireAt, outcome: 'fired', run_id: expect.any(Number), error: null })]);
    const runs = await runsOf(schedule.id);
    expect(runs.map((run) => run.id)).toEqual([fires[0].run_id]);
    expect(runs[0]).toMatchObject({ kind: 'job', trigger: 'schedule', schedule_id: schedule.id, job_id: schedule.job });
    return runs[0];
  };

  beforeAll(async () => {
    fs.mkdirSync(markers);
    const manifests = path.join(temp.dir, 'manifests');
    fs.mkdirSync(manifests);
    writeManifest(manifests, { id: 'crashing_schedule_target', kind: 'extension', depends_on: ['scheduler', 'jobs', 'pipeline'] }, 'crashing-schedule-target');
    database = await createScratchDatabase(dialect, temp.dir);
    query = databaseQuery(dialect, database.url, { write: true });
    const settings = await serverSettings(temp.dir, database.url, [path.join(REPO_ROOT, 'manifests'), manifests]);
    ({ token } = settings);
    env = { ...settings.env, CRASH_MARKERS_DIR: markers };
    await restart();
    project = (await api('POST', '/api/projects', { key: 'FIRES', name: 'Fires' })).body.id;
    // No recipe produces it: each build is over at once.
    dataset = (await api('POST', '/api/datasets', { name: 'ticks', project_id: project, columns: [{ name: 'id', type: 'integer' }] })).body.id;
  }, 90_000);
  afterAll(async () => {
    await killAll(live);
    await database?.drop();
    temp.remove();
  });

  it('killed after the fire was recorded and before its run was created, finishes the fire after the restart with one run', { timeout: 90_000 }, async () => {
    await serving();
    arm('before-run');
    const schedule = await scheduleOnce();
    await killedByFire();
    expect(await leftBehind(schedule.id)).toEqual({ fires: [{ outcome: 'firing', run_id: null }], runs: 0 });

    await restart();
    const run = await firedOnce(schedule);
    expect((await until(async () => (await api('GET', `/api/pipeline/runs/${run.id}`)).body, (r) => r.status === 'succeeded', 15_000)).status).toBe('succeeded');
  });

  it('killed after its run was created and before the fire ended, answers that run after the restart: no second one', { timeout: 90_000 }, async () => {
    await serving();
    arm('after-run');
    const schedule = await scheduleOnce();
    await killedByFire();
    expect(await leftBehind(schedule.id)).toEqual({ fires: [{ outcome: 'firing', run_id: null }], runs: 1 });

    await restart();
    await firedOnce(schedule);
  });

  it('asked twice at once with one fire key, the pipeline starts one run', { timeout: 60_000 }, async () => {
    await serving();
    await firedOnce(await scheduleOnce());
  });

  it('a fire whose work ran out of attempts long ago is finished by the sweep, with one run', { timeout: 90_000 }, async () => {
    await serving();
    arm('before-run');
    const schedule = await scheduleOnce();
    await killedByFire();
    // As if every attempt had died and the kernel had ended the work `lost` two minutes ago.
    const [{ work_id: workId }] = await query<{ work_id: number }>('select work_id from scheduler_fires where schedule_id = $1', [schedule.id]);
    const longAgo = new Date(Date.now() - 120_000).toISOString();
    await query("update background_work set status = 'failed', reason = 'lost', lease_owner = null, lease_expires_at = null, finished_at = $1 where id = $2", [longAgo, workId]);
    await query('update scheduler_fires set started_at = $1 where schedule_id = $2', [longAgo, schedule.id]);

    await restart();
    await firedOnce(schedule);
    const [{ work_id: finisher }] = await query<{ work_id: number }>('select work_id from scheduler_fires where schedule_id = $1', [schedule.id]);
    expect(Number(finisher)).not.toBe(Number(workId));
  });

  it('a fire whose target was deleted while no instance ran fails after the restart, saying so', { timeout: 90_000 }, async () => {
    await serving();
    arm('before-run');
    const schedule = await scheduleOnce();
    await killedByFire();
    await query('delete from jobs where id = $1', [schedule.job]);

    await restart();
    const fires = await ended(schedule.id);
    expect(fires).toEqual([expect.objectContaining({ outcome: 'failed', run_id: null, error: `its target (crashing_job_id ${schedule.job}) no longer exists` })]);
    expect(await runsOf(schedule.id)).toEqual([]);
  });
});
