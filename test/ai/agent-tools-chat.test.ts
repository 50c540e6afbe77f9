import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { startOpenAiServer, type LlmServer } from '../harness/llm-servers.ts';
import { expectProblem, sseEvents } from '../harness/answers.ts';

/** A workflow (or messaging provider) on loopback: records each POST, answers JSON. */
async function startReceiver() {
  const received: { path: string; body: any; authorization?: string }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : null;
      received.push({ path: req.url ?? '', body, authorization: req.headers.authorization });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(req.url?.startsWith('/messages') ? { id: 'wamid.1', status: 'queued' } : { accepted: true, ticket: 'T-42', echo: body?.message }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const CUSTOMERS_CSV = 'name,city,email\nAda,Paris,ada@example.com\nBob,Lyon,bob@example.com\nCy,Paris,cy@example.com\n';

/** Issue 19, "Agent tools" and "Chat": through HTTP on both adapters, a model server on loopback scripted to call tools. */
describe.each(DIALECTS)('agent tools and chat (%s)', (dialect) => {
  let t: TestKernel;
  let openai: LlmServer;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let connectionId: number;
  let workflowId: number;
  let datasetName: string;
  let datasetId: number;

  const invoke = (name: string, args: unknown, token?: string) => t.request('POST', `/api/agent-tools/${name}/invoke`, { body: { arguments: args }, token });

  beforeAll(async () => {
    openai = await startOpenAiServer();
    receiver = await startReceiver();
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1', CHAT_MAX_TOOL_STEPS: '2' } });
    const project = await t.request('POST', '/api/projects', { body: { key: 'AGENT', name: 'Agent' } });
    datasetName = `customers_${dialect}`;
    const dataset = await t.request('POST', '/api/datasets', { body: { project_id: project.body.id, name: datasetName, columns: [{ name: 'name', type: 'string' }, { name: 'city', type: 'string' }, { name: 'email', type: 'string', pii: true }] } });
    expect(dataset.status, dataset.text).toBe(201);
    datasetId = dataset.body.id;
    expect((await t.request('POST', `/api/datasets/${dataset.body.id}/data`, { body: CUSTOMERS_CSV, headers: { 'content-type': 'text/csv' } })).status).toBe(200);
    const workflow = await t.request('POST', '/api/connectors', { body: { name: 'ops-workflow', type: 'workflow_webhook', config: { webhook_url: `${receiver.url}/hooks/ops` } } });
    expect(workflow.status, workflow.text).toBe(201);
    workflowId = workflow.body.id;
    const connection = await t.request('POST', '/api/llm-mesh/connections', { body: { name: 'agent-model', provider: 'openai_compatible', config: { base_url: `${openai.url}/v1`, default_model: 'gpt-test' } } });
    connectionId = connection.body.id;
  });
  afterAll(async () => {
    await t?.stop();
    await openai?.close();
    await receiver?.close();
  });

  it('lists the tools in the function-calling format, to those who may call them', async () => {
    const res = await t.request('GET', '/api/agent-tools');
    expect(res.status, res.text).toBe(200);
    expect(res.body.items.map((tool: any) => tool.function.name)).toEqual(['call_api_service', 'dataset_lookup', 'knowledge_search', 'send_to_workflow', 'send_whatsapp', 'sql_query']);
    expect(res.body.items.find((tool: any) => tool.function.name === 'send_to_workflow')).toMatchObject({ type: 'function', function: { parameters: { type: 'object', required: ['message'] } } });
    const viewer = await t.userToken('viewer', `tools-viewer-${dialect}`);
    expectProblem(await t.request('GET', '/api/agent-tools', { token: viewer.token }), 403);
  });

  it('send_to_workflow POSTs {message, metadata} through the workflow_webhook connector and answers what the workflow answered', async () => {
    const res = await invoke('send_to_workflow', { message: 'Restock Paris', metadata: { priority: 'high' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.result).toEqual({ accepted: true, ticket: 'T-42', echo: 'Restock Paris' });
    expect(receiver.received.at(-1)).toMatchObject({ path: '/hooks/ops', body: { message: 'Restock Paris', metadata: { priority: 'high' } } });

    expectProblem(await invoke('send_to_workflow', { metadata: {} }), 400, 'body.arguments.message');
    expectProblem(await invoke('send_to_workflow', { message: 'x', extra: "'; drop table connectors; --" }), 400, 'body.arguments.extra');
    expectProblem(await invoke('send_to_workflow', { message: 'x'.repeat(100_001) }), 400, 'body.arguments.message');
    expectProblem(await invoke('send_to_workflow', { message: 'x', connector_id: 999_999 }), 400, 'body.arguments.connector_id');
    expectProblem(await invoke('no_such_tool', {}), 404);
    // A second workflow: the tool must be told which.
    const second = await t.request('POST', '/api/connectors', { body: { name: 'second-workflow', type: 'workflow_webhook', config: { webhook_url: `${receiver.url}/hooks/second` } } });
    expectProblem(await invoke('send_to_workflow', { message: 'which?' }), 400, 'body.arguments.connector_id');
    expect((await invoke('send_to_workflow', { message: 'to the second', connector_id: second.body.id })).status).toBe(200);
    expect(receiver.received.at(-1)!.path).toBe('/hooks/second');
    expect((await t.request('DELETE', `/api/connectors/${second.body.id}`)).status).toBe(204);

    const audit = await t.request('GET', '/api/audit?action=agent_tools.invoke&limit=20');
    expect(audit.body.items[0]).toMatchObject({ target_type: 'agent_tool', target_id: 'send_to_workflow', details: { arguments: ['message', 'connector_id'] } });
    expect(audit.text).not.toContain('Restock Paris');
  });

  it('send_whatsapp sends through the organization\u2019s messaging provider; without one it says so', async () => {
    expectProblem(await invoke('send_whatsapp', { to: '+33612345678', message: 'hello' }), 422);
    const provider = await t.request('POST', '/api/connectors', { body: { name: 'whatsapp', type: 'messaging_provider', config: { base_url: receiver.url, sender: '+15550001111', token: 'wa-token-not-shown' } } });
    expect(provider.status, provider.text).toBe(201);
    const res = await invoke('send_whatsapp', { to: '+33612345678', message: 'Your order shipped' });
    expect(res.status, res.text).toBe(200);
    expect(res.body.result).toEqual({ sent: true, provider_answer: { id: 'wamid.1', status: 'queued' } });
    expect(receiver.received.at(-1)).toMatchObject({ path: '/messages', body: { from: '+15550001111', to: '+33612345678', text: 'Your order shipped' }, authorization: 'Bearer wa-token-not-shown' });
    expectProblem(await invoke('send_whatsapp', { to: '0612345678', message: 'x' }), 400, 'body.arguments.to');
    expectProblem(await invoke('send_whatsapp', { to: '+33612345678\u0000', message: 'x' }), 400);
  });

  it('dataset_lookup and sql_query read as the caller: filters in the rows language, PII masked, writes refused', async () => {
    // An editor sees personal data masked (the admin holds datasets.pii.read).
    const editor = await t.userToken('editor', `lookup-editor-${dialect}`);
    const lookup = await invoke('dataset_lookup', { dataset: datasetName, filters: ['city:eq:Paris'], columns: ['name', 'email'] }, editor.token);
    expect(lookup.status, lookup.text).toBe(200);
    expect(lookup.body.result.rows).toEqual([{ name: 'Ada', email: '***' }, { name: 'Cy', email: '***' }]);
    expect((await invoke('dataset_lookup', { dataset: datasetName, filters: ['city:eq:Paris'], columns: ['email'] })).body.result.rows).toEqual([{ email: 'ada@example.com' }, { email: 'cy@example.com' }]);
    const masked = await invoke('sql_query', { sql: `select email from ${datasetName} where name = $1`, params: ['Bob'] }, editor.token);
    expect(masked.body.result.rows).toEqual([['***']]);
    // The caller's row policies apply: a member of a group limited to Lyon sees Lyon's rows only, by name or by id.
    const lyonOnly = await t.userToken('editor', `lyon-only-${dialect}`);
    const group = await t.request('POST', '/api/groups', { body: { name: `lyon-${dialect}`, capabilities: [] } });
    expect((await t.request('POST', `/api/groups/${group.body.id}/members`, { body: { user_id: lyonOnly.id } })).status).toBe(201);
    expect((await t.request('POST', `/api/datasets/${datasetId}/row-policies`, { body: { group_id: group.body.id, filters: ['city:eq:Lyon'] } })).status).toBe(201);
    expect((await invoke('dataset_lookup', { dataset: datasetName, columns: ['name'] }, lyonOnly.token)).body.result.rows).toEqual([{ name: 'Bob' }]);
    expect((await invoke('dataset_lookup', { dataset: datasetId, filters: ['city:eq:Paris'] }, lyonOnly.token)).body.result.rows).toEqual([]);
    expectProblem(await invoke('dataset_lookup', { dataset: 'no_such_dataset' }), 400, 'body.arguments.dataset');
    expectProblem(await invoke('dataset_lookup', { dataset: datasetName, limit: 51 }), 400, 'body.arguments.limit');

    const query = await invoke('sql_query', { sql: `select city, count(*) as n from ${datasetName} where city = $1 group by city -- a comment`, params: ['Lyon'] });
    expect(query.status, query.text).toBe(200);
    expect(query.body.result).toMatchObject({ columns: [{ name: 'city' }, { name: 'n' }], rows: [['Lyon', 1]] });
    expectProblem(await invoke('sql_query', { sql: `delete from ${datasetName}` }), 400);
    expectProblem(await invoke('sql_query', { sql: `select 1; /* */ drop table ${datasetName}` }), 400);
  });

  it('chats: the model calls a tool, the platform runs it as the user and feeds back the result, then the model answers', async () => {
    const created = await t.request('POST', '/api/chat/conversations', { body: { title: 'Ops', connection_id: connectionId, system_prompt: 'You run operations.', tools: ['send_to_workflow', 'dataset_lookup'] } });
    expect(created.status, created.text).toBe(201);
    const id = created.body.id;
    openai.script.push({ tool_calls: [{ name: 'send_to_workflow', arguments: { message: 'Restock Lyon', metadata: { from: 'chat' } } }] }, { text: 'Done: ticket T-42 was opened.' });
    const res = await t.request('POST', `/api/chat/conversations/${id}/messages`, { body: { content: 'Please restock Lyon' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({
      message: { role: 'assistant', content: 'Done: ticket T-42 was opened.' },
      tool_calls: [{ name: 'send_to_workflow', arguments: { message: 'Restock Lyon', metadata: { from: 'chat' } }, result: { accepted: true, ticket: 'T-42' } }],
      model_calls: 2,
    });
    expect(receiver.received.at(-1)).toMatchObject({ path: '/hooks/ops', body: { message: 'Restock Lyon', metadata: { from: 'chat' } } });
    // The second model call saw the tool's answer.
    const second = openai.requests.at(-1)!.body;
    expect(second.messages.map((m: { role: string }) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(JSON.parse(second.messages[3].content)).toMatchObject({ ticket: 'T-42' });
    expect(second.tools.map((tool: any) => tool.function.name).sort()).toEqual(['dataset_lookup', 'send_to_workflow']);

    const kept = await t.request('GET', `/api/chat/conversations/${id}`);
    expect(kept.body.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect(kept.body.messages[2]).toMatchObject({ tool_name: 'send_to_workflow' });

    // The next message carries the history.
    await t.request('POST', `/api/chat/conversations/${id}/messages`, { body: { content: 'Thanks' } });
    expect(openai.requests.at(-1)!.body.messages.map((m: { role: string }) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'user']);
  });

  it('streams a reply as Server-Sent Events: text, tool calls and tool results as they happen', async () => {
    const created = await t.request('POST', '/api/chat/conversations', { body: { connection_id: connectionId, tools: ['dataset_lookup'] } });
    const id = created.body.id;
    openai.script.push({ tool_calls: [{ name: 'dataset_lookup', arguments: { dataset: datasetName, filters: ['city:eq:Paris'] } }] }, { pieces: ['Two customers', ' live in Paris.'] });
    const res = await t.request('POST', `/api/chat/conversations/${id}/messages`, { body: { content: 'Who lives in Paris?', stream: true } });
    expect(res.status, res.text).toBe(200);
    const events = sseEvents(res.text);
    expect(events.map((e) => e.event)).toEqual(['tool_call', 'tool_result', 'delta', 'delta', 'done']);
    expect(events[1].data.result.rows.map((r: { name: string }) => r.name)).toEqual(['Ada', 'Cy']);
    expect(events.at(-1)!.data).toMatchObject({ message: { content: 'Two customers live in Paris.' }, model_calls: 2 });
  });

  it('tells the model what a tool refused, and after CHAT_MAX_TOOL_STEPS rounds asks it to answer without tools', async () => {
    const created = await t.request('POST', '/api/chat/conversations', { body: { connection_id: connectionId, tools: ['dataset_lookup'] } });
    const id = created.body.id;
    const lookupMissing = { tool_calls: [{ name: 'dataset_lookup', arguments: { dataset: 'missing_one' } }] };
    openai.script.push(lookupMissing, lookupMissing, { text: 'I could not find that dataset.' });
    const before = openai.requests.length;
    const res = await t.request('POST', `/api/chat/conversations/${id}/messages`, { body: { content: 'Look up missing_one' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.tool_calls).toHaveLength(2);
    expect(res.body.tool_calls[0].error).toMatchObject({ status: 400, detail: expect.stringContaining('missing_one') });
    expect(res.body).toMatchObject({ message: { content: 'I could not find that dataset.' }, model_calls: 3 });
    const sent = openai.requests.slice(before).map((r) => r.body);
    expect(sent.map((b) => Array.isArray(b.tools))).toEqual([true, true, false]);
  });

  it('holds every model call of the loop to the connection\u2019s guardrails and quotas: the user\u2019s message named, a spent quota a 429, nothing kept', async () => {
    const guarded = await t.request('POST', '/api/llm-mesh/connections', {
      body: { name: 'guarded-chat', provider: 'openai_compatible', config: { base_url: `${openai.url}/v1`, default_model: 'gpt-test', prices: { 'gpt-test': { input_per_million: 1_000_000, output_per_million: 1_000_000 } } }, guardrails: { pii: { kinds: ['email', 'payment_card'], action: 'redact', actions: { payment_card: 'reject' } } } },
    });
    expect(guarded.status, guarded.text).toBe(201);
    const chat = await t.request('POST', '/api/chat/conversations', { body: { connection_id: guarded.body.id, tools: ['dataset_lookup'] } });
    const say = (content: string, stream = false) => t.request('POST', `/api/chat/conversations/${chat.body.id}/messages`, { body: { content, stream } });

    // Redacted before the model sees it; a rejected kind names the message the caller sent.
    openai.script.push({ text: 'Noted.' });
    expect((await say('Write to ada@example.com')).status).toBe(200);
    expect(openai.requests.at(-1)!.body.messages.at(-1).content).toBe('Write to [EMAIL]');
    const refused = await say('My card is 4111 1111 1111 1111');
    expectProblem(refused, 400, 'body.content');
    expect(refused.text).not.toContain('4111');
    // A tool's answer is checked when it goes back to the model: Ada's email, which the tool reads, is redacted too.
    openai.script.push({ tool_calls: [{ name: 'dataset_lookup', arguments: { dataset: datasetName, filters: ['name:eq:Ada'], columns: ['email'] } }] }, { text: 'Found her.' });
    expect((await say('Find Ada')).status).toBe(200);
    expect(openai.requests.at(-1)!.body.messages.at(-1)).toMatchObject({ role: 'tool', content: expect.stringContaining('[EMAIL]') });
    expect(openai.requests.at(-1)!.body.messages.at(-1).content).not.toContain('ada@example.com');

    // A blocking quota spent: the loop's next model call is refused with 429, whole or streamed, and the exchange is not kept.
    const quota = await t.request('POST', '/api/llm-mesh/quotas', { body: { scope: 'connection', scope_id: guarded.body.id, amount_usd: 1, period: 'month', blocking: true } });
    expect(quota.status, quota.text).toBe(201);
    const kept = (await t.request('GET', `/api/chat/conversations/${chat.body.id}`)).body.messages.length;
    expectProblem(await say('One more?'), 429);
    // Refused before anything streamed: a plain 429 problem, not an event stream.
    expectProblem(await say('One more, streamed?', true), 429);
    expect((await t.request('GET', `/api/chat/conversations/${chat.body.id}`)).body.messages.length).toBe(kept);
    expect((await t.request('DELETE', `/api/llm-mesh/quotas/${quota.body.id}`)).status).toBe(204);
  });

  it('offers no tool whose plugin is disabled for the organization: not listed, not invoked, not callable in a chat', async () => {
    expect((await t.request('PUT', '/api/plugins/tool_dataset_lookup/organizations/1', { body: { enabled: false } })).status).toBe(200);
    try {
      expect((await t.request('GET', '/api/agent-tools')).body.items.map((tool: any) => tool.function.name)).not.toContain('dataset_lookup');
      expectProblem(await invoke('dataset_lookup', { dataset: datasetName }), 404);
      expectProblem(await t.request('POST', '/api/chat/conversations', { body: { connection_id: connectionId, tools: ['dataset_lookup'] } }), 400, 'body.tools.0');
      const other = await t.outsider(`tools-outsider-${dialect}`);
      expect((await t.request('GET', '/api/agent-tools', { token: other.token })).body.items.map((tool: any) => tool.function.name)).toContain('dataset_lookup');
    } finally {
      expect((await t.request('PUT', '/api/plugins/tool_dataset_lookup/organizations/1', { body: { enabled: true } })).status).toBe(200);
    }
    expect((await invoke('dataset_lookup', { dataset: datasetName, limit: 1 })).status).toBe(200);
  });

  it('refuses bad conversations, and keeps each user\u2019s conversations to themselves', async () => {
    expectProblem(await t.request('POST', '/api/chat/conversations', { body: { connection_id: 999_999 } }), 400, 'body.connection_id');
    expectProblem(await t.request('POST', '/api/chat/conversations', { body: { connection_id: connectionId, tools: ['rm_rf'] } }), 400, 'body.tools.0');
    expectProblem(await t.request('POST', '/api/chat/conversations', { body: { connection_id: connectionId, title: 'x'.repeat(201) } }), 400, 'body.title');
    const listing = await t.request('POST', '/api/llm-mesh/connections', { body: { name: 'listing-models', provider: 'openai_compatible', config: { base_url: `${openai.url}/v1`, models: ['gpt-test'] } } });
    expectProblem(await t.request('POST', '/api/chat/conversations', { body: { connection_id: listing.body.id, model: 'gpt-unknown' } }), 400, 'body.model');
    expectProblem(await t.request('POST', '/api/chat/conversations', { body: { connection_id: connectionId, system_prompt: 'x'.repeat(100_001) } }), 400, 'body.system_prompt');
    expectProblem(await t.request('POST', '/api/chat/conversations', { body: { connection_id: connectionId, tools: "'; drop table chat_conversations; --" } }), 400, 'body.tools');
    const mine = await t.request('POST', '/api/chat/conversations', { body: { title: 'private', connection_id: connectionId } });
    const editor = await t.userToken('editor', `chat-editor-${dialect}`);
    expectProblem(await t.request('GET', `/api/chat/conversations/${mine.body.id}`, { token: editor.token }), 404);
    expectProblem(await t.request('POST', `/api/chat/conversations/${mine.body.id}/messages`, { token: editor.token, body: { content: 'hi' } }), 404);
    expectProblem(await t.request('DELETE', `/api/chat/conversations/${mine.body.id}`, { token: editor.token }), 404);
    expect((await t.request('GET', '/api/chat/conversations', { token: editor.token })).body.items).toEqual([]);
    expectProblem(await t.request('POST', `/api/chat/conversations/${mine.body.id}/messages`, { body: { content: '' } }), 400, 'body.content');
    expect((await t.request('DELETE', `/api/chat/conversations/${mine.body.id}`)).status).toBe(204);
    expectProblem(await t.request('GET', `/api/chat/conversations/${mine.body.id}`), 404);
  });
});
