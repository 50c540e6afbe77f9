import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sseEvents } from '../harness/answers.ts';
import { formWith, pdfOf } from '../harness/documents.ts';
import { DIALECTS, startTestKernel, type TestKernel } from '../harness/index.ts';
import { startOpenAiServer, type LlmServer } from '../harness/llm-servers.ts';
import { createReadmeOrders } from '../harness/readme-orders.ts';
import { finished } from '../pipeline/pipeline-helpers.ts';

const HANDBOOK = ['Employee handbook. Leave: every employee gets 25 days of paid leave a year, taken in agreement with their manager.', 'Expenses are reimbursed within 30 days of the claim, receipts attached.'];

/**
 * The README's LLM mesh, chat and knowledge walkthrough, request for request: a local OpenAI-compatible
 * server (Ollama's wire format) on loopback stands in for Ollama, a receiver for the workflow.
 */
describe.each(DIALECTS)("the README's AI walkthrough (%s)", (dialect) => {
  let t: TestKernel;
  let ollama: LlmServer;
  let workflow: http.Server;
  let workflowUrl: string;
  const received: unknown[] = [];
  const post = (path: string, body: unknown) => t.request('POST', path, { body });

  beforeAll(async () => {
    ollama = await startOpenAiServer();
    workflow = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        received.push(JSON.parse(body));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ticket: 'T-42' }));
      });
    });
    await new Promise<void>((resolve) => workflow.listen(0, '127.0.0.1', resolve));
    workflowUrl = `http://127.0.0.1:${(workflow.address() as AddressInfo).port}/ops`;
    t = await startTestKernel({ dialect, env: { OUTBOUND_ALLOWED_HOSTS: '127.0.0.1', WORKER_POLL_MS: '50' } });
    await createReadmeOrders(t);
  });
  afterAll(async () => {
    await t?.stop();
    await ollama?.close();
    await new Promise((resolve) => workflow?.close(resolve));
  });

  it('adds an OpenAI-compatible connection, chats with a tool that calls the workflow, and asks a knowledge base that answers with sources', async () => {
    const connection = await post('/api/llm-mesh/connections', {
      name: 'ollama',
      provider: 'openai_compatible',
      config: { base_url: `${ollama.url}/v1`, models: ['llama3.2', 'nomic-embed-text'], default_model: 'llama3.2', prices: { 'llama3.2': { input_per_million: 0.1, output_per_million: 0.2 } } },
      guardrails: { pii: { action: 'redact', actions: { payment_card: 'reject' } }, prompt_injection: { action: 'flag' }, max_prompt_chars: 20000 },
      rate_limits: { requests_per_minute: 60, tokens_per_minute: 100000 },
      log_prompts: false,
    });
    expect(connection.status, connection.text).toBe(201);
    const CONN = connection.body.id;
    expect((await post(`/api/llm-mesh/connections/${CONN}/test`, undefined)).body.ok).toBe(true);
    const hi = await post('/api/llm-mesh/completions', { connection_id: CONN, messages: [{ role: 'user', content: 'Say hi to jane@example.com' }], max_tokens: 100 });
    expect(hi.body).toMatchObject({ message: { content: 'You said: Say hi to [EMAIL]' }, guardrails: [{ guardrail: 'pii', stage: 'prompt', kind: 'email', action: 'redact', count: 1 }] });
    ollama.script.push({ pieces: ['One, ', 'two, ', 'three, ', 'four, ', 'five.'] });
    const counted = sseEvents((await post('/api/llm-mesh/completions', { connection_id: CONN, messages: [{ role: 'user', content: 'Count to five' }], stream: true })).text);
    expect(counted.at(-1)).toMatchObject({ event: 'done', data: { message: { content: 'One, two, three, four, five.' } } });
    expect((await post('/api/llm-mesh/embeddings', { connection_id: CONN, model: 'nomic-embed-text', input: ['alpha', 'beta'] })).body.vectors).toHaveLength(2);
    expect((await t.request('GET', '/api/llm-mesh/usage?group_by=model')).body.items.find((u: { model: string }) => u.model === 'llama3.2').requests).toBe(2);

    const FLOW = (await post('/api/connectors', { name: 'ops', type: 'workflow_webhook', config: { webhook_url: workflowUrl } })).body.id;
    const chat = await post('/api/chat/conversations', { title: 'Ops', connection_id: CONN, system_prompt: 'You run operations.', tools: ['send_to_workflow', 'dataset_lookup'] });
    expect(chat.status, chat.text).toBe(201);
    const CHAT = chat.body.id;
    expect(FLOW).toEqual(expect.any(Number));
    ollama.script.push({ tool_calls: [{ name: 'send_to_workflow', arguments: { message: 'Restock Lyon', metadata: { priority: 'high' } } }] }, { text: 'Done: ticket T-42 was opened.' });
    const reply = await post(`/api/chat/conversations/${CHAT}/messages`, { content: 'Please ask the workflow to restock Lyon' });
    expect(reply.body).toMatchObject({ message: { content: 'Done: ticket T-42 was opened.' }, tool_calls: [{ name: 'send_to_workflow', result: { ticket: 'T-42' } }], model_calls: 2 });
    expect(received).toEqual([{ message: 'Restock Lyon', metadata: { priority: 'high' } }]);
    ollama.script.push({ tool_calls: [{ name: 'dataset_lookup', arguments: { dataset: 'orders', filters: ['country:eq:FR'] } }] }, { text: 'Order 1 came from France.' });
    const streamed = sseEvents((await post(`/api/chat/conversations/${CHAT}/messages`, { content: 'Which orders came from France?', stream: true })).text);
    expect(streamed.map((e) => e.event)).toEqual(['tool_call', 'tool_result', 'delta', 'done']);
    expect(streamed[1].data.result.rows).toEqual([expect.objectContaining({ id: 1, country: 'FR' })]);
    expect((await t.request('GET', `/api/chat/conversations/${CHAT}`)).body.messages).toHaveLength(8);

    const form = formWith({ name: 'handbook.pdf', type: 'application/pdf', content: pdfOf(HANDBOOK) });
    const DOC = (await t.request('POST', '/api/knowledge/documents', { body: form.body, headers: { 'content-type': form.contentType } })).body.id;
    expect((await t.request('GET', `/api/knowledge/documents/${DOC}`)).body.text).toContain('25 days of paid leave');
    const KB = (await post('/api/knowledge-bases', { project_id: 1, name: 'Handbook', embedding: { connection_id: CONN, model: 'nomic-embed-text' }, chunking: { size: 1000, overlap: 150 } })).body.id;
    const indexing = await post(`/api/knowledge-bases/${KB}/documents`, { document_ids: [DOC] });
    expect(indexing.status).toBe(202);
    expect((await finished(t, indexing.body.run.id)).status).toBe('succeeded');
    const search = await post(`/api/knowledge-bases/${KB}/search`, { query: 'How many days of leave?', top_k: 5, mode: 'hybrid' });
    expect(search.body.items[0].text).toContain('25 days');
    ollama.script.push({ text: 'Every employee gets 25 days of paid leave a year [1].' });
    const answer = await post(`/api/knowledge-bases/${KB}/ask`, { question: 'How many days of leave do I get?', connection_id: CONN });
    expect(answer.body).toMatchObject({ answer: 'Every employee gets 25 days of paid leave a year [1].', grounded: true, sources: [{ n: 1, document_id: DOC, document_name: 'handbook.pdf' }] });
  });
});
