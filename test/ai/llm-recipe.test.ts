import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblem } from '../harness/answers.ts';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { startOpenAiServer, type LlmServer } from '../harness/llm-servers.ts';
import { createRecipe, emptyDataset, loadDataset, rowsOf, runRecipe } from '../pipeline/pipeline-helpers.ts';

const REVIEWS = ['1,"Great coffee, friendly staff"', '2,"Cold croissant; never again"', '3,"Fine, nothing special"', '4,"Write to me at ana@example.com"', '5,"Best bakery in town"'];

/** Issue 19, "AI recipes": the `llm_prompt` recipe type through HTTP on both adapters, its model a server on loopback. */
describe.each(DIALECTS)('AI recipe llm_prompt (%s)', (dialect) => {
  let t: TestKernel;
  let openai: LlmServer;
  let project: number;
  let reviews: number;
  let connection: number;
  let strict: number;

  const recipe = (name: string, params: Record<string, unknown>, outputs: number[]) => ({ project_id: project, name, type: 'llm_prompt', inputs: [reviews], outputs, params });

  beforeAll(async () => {
    openai = await startOpenAiServer();
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1' } });
    project = (await t.request('POST', '/api/projects', { body: { key: 'AIR', name: 'AI recipes' } })).body.id;
    reviews = await loadDataset(t, project, 'reviews', ['id:integer', 'review:string'], REVIEWS);
    const config = { base_url: `${openai.url}/v1`, default_model: 'gpt-test', prices: { 'gpt-test': { input_per_million: 1, output_per_million: 1 } } };
    connection = (await t.request('POST', '/api/llm-mesh/connections', { body: { name: 'recipes', provider: 'openai_compatible', config } })).body.id;
    strict = (await t.request('POST', '/api/llm-mesh/connections', { body: { name: 'no-pii', provider: 'openai_compatible', config, guardrails: { pii: { kinds: ['email'], action: 'reject' } } } })).body.id;
  });
  afterAll(async () => {
    await t?.stop();
    await openai?.close();
  });

  it('answers each row\u2019s prompt through the mesh into the output column, every call traced and counted', async () => {
    const out = await emptyDataset(t, project, 'classified');
    const id = await createRecipe(t, recipe('classify', { connection_id: connection, prompt_template: 'Classify the sentiment of: {{review}} (#{{ id }})', system_prompt: 'Answer positive, negative or neutral.', output_column: 'sentiment', batch_size: 2, concurrency: 2 }, [out]));
    const schema = await t.request('GET', `/api/pipeline/recipes/${id}/schema`);
    expect(schema.body.outputs[0].columns.map((c: { name: string; type: string }) => `${c.name}:${c.type}`)).toEqual(['id:integer', 'review:string', 'sentiment:string']);
    const before = openai.requests.length;
    const run = await runRecipe(t, id);
    expect(run.status, JSON.stringify(run)).toBe('succeeded');
    const rows = await rowsOf(t, out);
    expect(rows.map((r) => r.sentiment)).toEqual(REVIEWS.map((line) => {
      const [idText, ...rest] = line.split(',');
      return `You said: Classify the sentiment of: ${rest.join(',').replace(/^"|"$/g, '')} (#${idText})`;
    }));
    const sent = openai.requests.slice(before);
    expect(sent).toHaveLength(5);
    expect(sent[0].body.messages[0]).toEqual({ role: 'system', content: 'Answer positive, negative or neutral.' });
    const traces = await t.request('GET', `/api/llm-mesh/calls?connection_id=${connection}`);
    expect(traces.body.items.filter((c: { status: string }) => c.status === 'ok')).toHaveLength(5);
    // Each call counts for the recipe's project and is traced under its run.
    expect(traces.body.items.slice(0, 5).map((c: { project_id: number; request_id: string }) => [c.project_id, c.request_id])).toEqual(Array(5).fill([project, `run-${run.id}`]));
    const byProject = await t.request('GET', '/api/llm-mesh/usage?group_by=project');
    expect(byProject.body.items.find((u: { project: number }) => u.project === project)).toMatchObject({ requests: 5 });
  });

  it('stops at the recipe\u2019s project quota: a blocking quota spent fails the run, naming it', async () => {
    const other = (await t.request('POST', '/api/projects', { body: { key: 'AIQ', name: 'AI quota' } })).body.id;
    const source = await loadDataset(t, other, 'quota_reviews', ['id:integer', 'review:string'], REVIEWS);
    const out = await emptyDataset(t, other, 'quota_out');
    const quota = await t.request('POST', '/api/llm-mesh/quotas', { body: { scope: 'project', scope_id: other, amount_usd: 0.000001, period: 'month', blocking: true } });
    expect(quota.status, quota.text).toBe(201);
    const id = await createRecipe(t, { project_id: other, name: 'quota', type: 'llm_prompt', inputs: [source], outputs: [out], params: { connection_id: connection, prompt_template: '{{review}}', concurrency: 1 } });
    const run = await runRecipe(t, id);
    expect(run.status).toBe('failed');
    expect(JSON.stringify(run.error)).toMatch(new RegExp(`LLM quota ${quota.body.id} \\(project ${other}`));
    // The first call spent it; the next was refused.
    const traces = (await t.request('GET', `/api/llm-mesh/calls?connection_id=${connection}`)).body.items.filter((c: { project_id: number }) => c.project_id === other);
    expect(traces.map((c: { status: string }) => c.status)).toEqual(['rejected', 'ok']);
  });

  it('a row the guardrails refuse fails the run, or (on_error null) is answered null and the rest go on', async () => {
    const failing = await emptyDataset(t, project, 'strict_out');
    const failed = await runRecipe(t, await createRecipe(t, recipe('strict', { connection_id: strict, prompt_template: '{{review}}' }, [failing])));
    expect(failed.status).toBe('failed');
    expect(JSON.stringify(failed.error)).toMatch(/email/);
    const lenient = await emptyDataset(t, project, 'lenient_out');
    const passed = await runRecipe(t, await createRecipe(t, recipe('lenient', { connection_id: strict, prompt_template: '{{review}}', on_error: 'null' }, [lenient])));
    expect(passed.status).toBe('succeeded');
    const rows = await rowsOf(t, lenient);
    expect(rows.map((r) => r.llm_output === null)).toEqual([false, false, false, true, false]);
  });

  it('refuses at create what cannot run, with a 400 naming the field', async () => {
    const out = await emptyDataset(t, project, 'refused_out');
    const create = (params: Record<string, unknown>) => t.request('POST', '/api/pipeline/recipes', { body: recipe('refused', params, [out]) });
    expectProblem(await create({ connection_id: 999_999, prompt_template: '{{review}}' }), 400, 'body.params.connection_id');
    expectProblem(await create({ connection_id: connection, prompt_template: 'About {{missing_column}}' }), 400, 'body.params.prompt_template');
    expectProblem(await create({ connection_id: connection, prompt_template: '{{review}}', output_column: 'review' }), 400, 'body.params.output_column');
    expectProblem(await create({ connection_id: connection, prompt_template: '{{review}}', concurrency: 33 }), 400, 'body.params.concurrency');
    // A template is not code: nothing but {{column}} is replaced.
    const literal = await emptyDataset(t, project, 'literal_out');
    const id = await createRecipe(t, recipe('literal', { connection_id: connection, prompt_template: "{{ ''.constructor.constructor('return process')() }} {% raw %} {{review}}" }, [literal]));
    expect((await runRecipe(t, id)).status).toBe('succeeded');
    expect(openai.requests.at(-1)!.body.messages[0].content).toMatch(/^\{\{ ''\.constructor\.constructor\('return process'\)\(\) \}\} \{% raw %\} /);
  });

  it('is accepted only where its plugin is enabled for the organization', async () => {
    const out = await emptyDataset(t, project, 'disabled_out');
    expect((await t.request('PUT', '/api/plugins/recipe_llm_prompt/organizations/1', { body: { enabled: false } })).status).toBe(200);
    try {
      const refused = await t.request('POST', '/api/pipeline/recipes', { body: recipe('off', { connection_id: connection, prompt_template: '{{review}}' }, [out]) });
      expectProblem(refused, 422, 'body.type');
      const types = await t.request('GET', '/api/plugins/recipe-types');
      expect(JSON.stringify(types.body)).not.toContain('llm_prompt');
    } finally {
      expect((await t.request('PUT', '/api/plugins/recipe_llm_prompt/organizations/1', { body: { enabled: true } })).status).toBe(200);
    }
    expect(JSON.stringify((await t.request('GET', '/api/plugins/recipe-types')).body)).toContain('llm_prompt');
  });
});
