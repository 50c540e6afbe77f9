import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratchDatabase, DIALECTS, REPO_ROOT, tempDir } from '../harness/index.ts';
import { client, killAll, killHard, launch, serverSettings, type ServerProcess } from '../harness/server-process.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const FINAL = ['succeeded', 'failed', 'cancelled', 'skipped'];

/** A training run outlives the server process running it: killed (SIGKILL) mid-training, it trains again from the start on the next process and its version is stored once. */
describe.each(DIALECTS)('a training run whose server process is killed mid-training (%s)', (dialect) => {
  const temp = tempDir('dp-registry-durability-');
  const live: ServerProcess[] = [];
  let database: Awaited<ReturnType<typeof createScratchDatabase>>;
  let env: Record<string, string>;
  let token: string;
  let api: ReturnType<typeof client>;
  let server: ServerProcess;

  const restart = async () => {
    server = await launch(env, live);
    api = client(server.url, token);
  };
  const logs = async (id: number) => ((await api('GET', `/api/pipeline/runs/${id}/logs`)).body.items as { message: string }[]).map((l) => l.message);
  const waitFor = async <T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number): Promise<T> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await read();
      if (done(value)) return value;
      if (Date.now() > deadline) throw new Error(`${what}: ${JSON.stringify(value)}`);
      await sleep(100);
    }
  };

  beforeAll(async () => {
    database = await createScratchDatabase(dialect, temp.dir);
    ({ env, token } = await serverSettings(temp.dir, database.url, [path.join(REPO_ROOT, 'manifests')]));
    await restart();
  }, 90_000);
  afterAll(async () => {
    await killAll(live);
    await database?.drop();
    temp.remove();
  });

  it('trains again (attempt 2) after the restart and stores one ready version', { timeout: 120_000 }, async () => {
    const project = (await api('POST', '/api/projects', { key: 'DUR', name: 'Durability' })).body.id;
    const dataset = (await api('POST', '/api/datasets', { name: 'points', project_id: project, columns: [{ name: 'x', type: 'number' }, { name: 'label', type: 'string' }] })).body.id;
    const csv = `x,label\n${Array.from({ length: 200 }, (_, i) => `${i / 10},${i < 100 ? 'low' : 'high'}`).join('\n')}\n`;
    expect((await api('POST', `/api/datasets/${dataset}/data`, csv, 'text/csv')).status).toBe(200);
    // Seconds of gradient steps: long enough to be killed in the middle.
    const started = await api('POST', '/api/registry/models', { project_id: project, name: 'slow', dataset_id: dataset, target: 'label', features: ['x'], task: 'classification', algorithm: 'logistic', params: { num_steps: 60000 } });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    const runId = started.body.run.id;
    const modelId = started.body.model.id;
    await waitFor('the training did not start', () => logs(runId), (lines) => lines.some((l) => l.startsWith('read 200 rows')), 30_000);

    await killHard(server);
    await restart();
    const run = await waitFor('the run did not end', async () => (await api('GET', `/api/pipeline/runs/${runId}`)).body, (r) => FINAL.includes(r.status), 90_000);
    expect(run.status, JSON.stringify(run)).toBe('succeeded');
    const lines = await logs(runId);
    expect(lines.some((l) => l.startsWith('attempt 2'))).toBe(true);
    expect(lines.filter((l) => l.startsWith('read 200 rows'))).toHaveLength(2);
    const versions = (await api('GET', `/api/registry/models/${modelId}/versions`)).body.items;
    expect(versions).toHaveLength(1);
    expect(versions[0]).toMatchObject({ version: 1, status: 'ready', training_rows: 160 });
    expect(versions[0].metrics.accuracy).toBeGreaterThan(0.9);
    const predicted = await api('POST', `/api/registry/models/${modelId}/predict`, { rows: [{ x: 1 }, { x: 19 }] });
    expect(predicted.body.predictions).toEqual(['low', 'high']);
  });
});
