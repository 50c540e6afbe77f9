import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, until, type TestKernel } from '../harness/index.ts';
import { finished } from './pipeline-helpers.ts';

/**
 * A third-party plugin contributing kinds of run (`pipeline.run-kinds`) through the SDK, started
 * through its own route with `pipeline.runs`' start: the pipeline keeps their status, logs, errors
 * and cancellation. A second plugin contributing one of the pipeline's own kinds is refused.
 */
function writeFixture(root: string) {
  fs.writeFileSync(path.join(root, 'package.json'), JSON.stringify({ type: 'module' }));
  fs.writeFileSync(
    path.join(root, 'index.ts'),
    `import { definePlugin, defineRoute, reply, z } from 'data-platform/plugin-api';
import { pipelineRuns, runKinds } from 'data-platform/plugins/pipeline';

export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    ctx.contribute(runKinds, {
      kind: 'echo_work',
      execute: async (context) => {
        if (context.payload.fail) throw new Error('the echo was asked to fail');
        if (context.payload.hang) return new Promise((_resolve, reject) => context.signal.addEventListener('abort', () => reject(context.signal.reason)));
        context.log('info', 'echo ' + context.payload.word + ' for ' + context.principal.onBehalfOf.username + ' in run ' + context.run.id);
      },
    });
    const runs = ctx.useService(pipelineRuns);
    return {
      routes: [
        defineRoute({
          method: 'post',
          path: '',
          summary: 'Start an echo',
          description: 'Starts a run of kind echo_work.',
          security: 'bearer',
          orgScoped: true,
          capability: 'pipeline.run',
          request: { body: z.object({ project_id: z.number().int(), payload: z.record(z.string(), z.unknown()) }) },
          responses: { 202: { description: 'Started', schema: z.object({ run_id: z.number().int() }) } },
          handler: async ({ body, orgId, principal }) => reply(202, { run_id: (await runs.start(orgId, { kind: 'echo_work', project_id: body.project_id, trigger: 'api', payload: body.payload }, principal)).id }),
        }),
      ],
    };
  },
});
`,
  );
  fs.writeFileSync(path.join(root, 'echo_runs.json'), JSON.stringify({ id: 'echo_runs', version: '1.0.0', kind: 'router', entry: './index.ts', router: { prefix: '/api/echo-runs', tag: 'echo' }, depends_on: ['pipeline'] }));
  const usurper = path.join(root, 'usurper');
  fs.mkdirSync(usurper);
  fs.writeFileSync(
    path.join(usurper, 'index.ts'),
    `import { definePlugin } from 'data-platform/plugin-api';
import { runKinds } from 'data-platform/plugins/pipeline';

export default definePlugin({ deps: {}, init: (_services, ctx) => void ctx.contribute(runKinds, { kind: 'recipe', execute: async () => undefined }) });
`,
  );
  fs.writeFileSync(path.join(root, 'usurper.json'), JSON.stringify({ id: 'usurper', version: '1.0.0', kind: 'extension', entry: './usurper/index.ts', depends_on: ['pipeline'] }));
}

describe.each(DIALECTS)('contributed kinds of run (%s)', (dialect) => {
  let t: TestKernel;
  const folder = tempDir('dp-run-kinds-');
  let project: number;
  const start = async (payload: Record<string, unknown>) => {
    const res = await t.request('POST', '/api/echo-runs', { body: { project_id: project, payload } });
    expect(res.status, res.text).toBe(202);
    return res.body.run_id as number;
  };

  beforeAll(async () => {
    writeFixture(folder.dir);
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), folder.dir] });
    project = (await t.request('POST', '/api/projects', { body: { key: 'ECHO', name: 'Echoes' } })).body.id;
  });
  afterAll(async () => {
    await t?.stop();
    folder.remove();
  });

  it('runs one: listed with its kind, logged, succeeded', async () => {
    const id = await start({ word: 'hello' });
    const run = await finished(t, id);
    expect(run).toMatchObject({ kind: 'echo_work', status: 'succeeded', trigger: 'api', project_id: project, error: null });
    const logs = await t.request('GET', `/api/pipeline/runs/${id}/logs`);
    expect(logs.body.items.map((l: { message: string }) => l.message)).toEqual([`echo hello for admin in run ${id}`, 'succeeded']);
    expect((await t.request('GET', '/api/pipeline/runs?kind=echo_work')).body.items.map((r: { id: number }) => r.id)).toContain(id);
    expect((await t.request('GET', '/api/pipeline/runs?kind=nothing_such')).status).toBe(400);
  });

  it('a throw fails the run with its message; a cancel stops a running one', async () => {
    const failed = await finished(t, await start({ fail: true }));
    expect(failed).toMatchObject({ status: 'failed', error: { title: 'Run failed', detail: 'the echo was asked to fail' } });
    const hanging = await start({ hang: true });
    await until(async () => (await t.request('GET', `/api/pipeline/runs/${hanging}`)).body.status, (s) => s === 'running');
    expect((await t.request('POST', `/api/pipeline/runs/${hanging}/cancel`)).status).toBe(200);
    expect(await finished(t, hanging)).toMatchObject({ status: 'cancelled', error: { title: 'Cancelled' } });
  });

  it('refuses a plugin contributing one of the pipeline\u2019s own kinds', async () => {
    const status = await t.request('GET', '/api/plugins/usurper');
    expect(status.body.state).toBe('failed');
    expect(status.body.reason).toMatch(/pipeline's own kinds/);
  });
});
