/**
 * Model servers on loopback speaking the providers' real wire formats, with scripted answers:
 * OpenAI's chat completions (whole, and streamed as Server-Sent Events with usage and tool calls),
 * embeddings and models; Anthropic's messages (whole and streamed) and models. Every request is
 * recorded, so a test sees exactly what the platform sent.
 */
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One scripted answer: text, tool calls, or a failure status. Text is streamed in `pieces` when given. */
export interface ScriptedAnswer {
  text?: string;
  pieces?: string[];
  tool_calls?: { name: string; arguments: Record<string, unknown> }[];
  usage?: { input_tokens: number; output_tokens: number };
  status?: number;
  /** Milliseconds to wait before answering. */
  delayMs?: number;
  /** Milliseconds between streamed pieces (default 5). */
  pieceDelayMs?: number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: any;
  /** The client (the platform) closed the connection before the answer ended. */
  aborted?: boolean;
}

export interface LlmServer {
  url: string;
  requests: RecordedRequest[];
  /** Answers to give, in order; when empty, the server echoes the last user message. */
  script: ScriptedAnswer[];
  /** Milliseconds each embeddings call waits before answering (a slow provider: something to cancel midway). */
  embeddingDelayMs?: number;
  close(): Promise<void>;
}

const readBody = (req: http.IncomingMessage) =>
  new Promise<any>((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      try {
        resolve(text ? JSON.parse(text) : null);
      } catch {
        resolve(text);
      }
    });
  });

const lastUserText = (messages: { role: string; content: unknown }[]) => {
  const last = [...messages].reverse().find((m) => m.role === 'user');
  if (!last) return '';
  return typeof last.content === 'string' ? last.content : JSON.stringify(last.content);
};

/** A vector of a text that makes texts sharing words close: a hashed bag of lower-cased words, normalized. */
export function embeddingOf(text: string, dimensions = 64): number[] {
  const vector = new Array(dimensions).fill(0);
  for (const word of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) vector[crypto.createHash('sha256').update(word).digest().readUInt32BE(0) % dimensions] += 1;
  const norm = Math.sqrt(vector.reduce((sum, v) => sum + v * v, 0)) || 1;
  return vector.map((v) => v / norm);
}

async function serve(handle: (req: http.IncomingMessage, body: any, res: http.ServerResponse, server: LlmServer) => Promise<void>): Promise<LlmServer> {
  const state: LlmServer = { url: '', requests: [], script: [], close: async () => undefined };
  const server = http.createServer(async (req, res) => {
    const body = await readBody(req);
    const recorded: RecordedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body };
    state.requests.push(recorded);
    res.on('close', () => {
      if (!res.writableFinished) recorded.aborted = true;
    });
    await handle(req, body, res, state);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}

/** An answer given in pieces is also the whole of them. */
const textOf = (answer: ScriptedAnswer): ScriptedAnswer => (answer.pieces && answer.text === undefined ? { ...answer, text: answer.pieces.join('') } : answer);

const json = (res: http.ServerResponse, status: number, value: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Azure OpenAI's paths (`/openai/deployments/{deployment}/…`, `/openai/models`) as OpenAI's, and the deployment it names. */
function azurePath(url: URL): { path: string; deployment?: string } | undefined {
  const deployed = /^\/openai\/deployments\/([^/]+)\/(chat\/completions|embeddings)$/.exec(url.pathname);
  if (deployed) return { path: `/v1/${deployed[2]}`, deployment: decodeURIComponent(deployed[1]) };
  return url.pathname === '/openai/models' ? { path: '/v1/models' } : undefined;
}

/**
 * An OpenAI-compatible server at `<url>/v1`, requiring `Authorization: Bearer <apiKey>` when one is
 * given; and Azure OpenAI's dialect at `<url>/openai`: the key in `api-key`, `?api-version=` required,
 * the deployment in the path standing for the model.
 */
export function startOpenAiServer(apiKey?: string): Promise<LlmServer> {
  return serve(async (req, body, res, state) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const azure = azurePath(url);
    if (azure) {
      if (apiKey && req.headers['api-key'] !== apiKey) return json(res, 401, { error: { code: '401', message: 'Access denied due to invalid subscription key or wrong API endpoint.' } });
      if (!url.searchParams.get('api-version')) return json(res, 404, { error: { code: '404', message: 'Resource not found' } });
      if (azure.deployment) body = { ...body, model: azure.deployment };
    } else if (apiKey && req.headers.authorization !== `Bearer ${apiKey}`) {
      return json(res, 401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error', code: 'invalid_api_key' } });
    }
    const path = azure?.path ?? url.pathname;
    if (req.method === 'GET' && path === '/v1/models') return json(res, 200, { object: 'list', data: ['gpt-test', 'embed-test'].map((id) => ({ id, object: 'model', created: 1700000000, owned_by: 'test' })) });
    if (req.method === 'POST' && path === '/v1/embeddings') {
      if (state.embeddingDelayMs) await sleep(state.embeddingDelayMs);
      const inputs: string[] = Array.isArray(body.input) ? body.input : [body.input];
      const tokens = inputs.reduce((n, t) => n + Math.ceil(t.length / 4), 0);
      return json(res, 200, { object: 'list', model: body.model, data: inputs.map((text, index) => ({ object: 'embedding', index, embedding: embeddingOf(text) })), usage: { prompt_tokens: tokens, total_tokens: tokens } });
    }
    if (req.method !== 'POST' || path !== '/v1/chat/completions') return json(res, 404, { error: { message: `no route ${req.method} ${path}` } });
    const answer = textOf(state.script.shift() ?? { text: `You said: ${lastUserText(body.messages)}` });
    if (answer.delayMs) await sleep(answer.delayMs);
    if (answer.status) return json(res, answer.status, { error: { message: `scripted failure ${answer.status}`, type: 'server_error' } });
    const usage = answer.usage ?? { input_tokens: 12, output_tokens: 7 };
    const toolCalls = (answer.tool_calls ?? []).map((c, i) => ({ id: `call_${i}_${crypto.randomUUID().slice(0, 8)}`, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.arguments) } }));
    const finish = toolCalls.length ? 'tool_calls' : 'stop';
    const id = `chatcmpl-${crypto.randomUUID()}`;
    if (!body.stream) {
      return json(res, 200, {
        id,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content: answer.text ?? null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) }, finish_reason: finish }],
        usage: { prompt_tokens: usage.input_tokens, completion_tokens: usage.output_tokens, total_tokens: usage.input_tokens + usage.output_tokens },
      });
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const chunk = (delta: unknown, finish_reason: string | null = null, extra: object = {}) =>
      res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: body.model, choices: [{ index: 0, delta, finish_reason }], ...extra })}\n\n`);
    chunk({ role: 'assistant', content: '' });
    for (const piece of answer.pieces ?? (answer.text ? [answer.text] : [])) {
      if (res.destroyed) break;
      chunk({ content: piece });
      await sleep(answer.pieceDelayMs ?? 5);
    }
    // A tool call in two pieces: its name first, then its arguments in halves, as OpenAI sends them.
    toolCalls.forEach((call, index) => {
      const args = call.function.arguments;
      chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] });
      chunk({ tool_calls: [{ index, function: { arguments: args.slice(0, Math.floor(args.length / 2)) } }] });
      chunk({ tool_calls: [{ index, function: { arguments: args.slice(Math.floor(args.length / 2)) } }] });
    });
    chunk({}, finish);
    if (body.stream_options?.include_usage) res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: body.model, choices: [], usage: { prompt_tokens: usage.input_tokens, completion_tokens: usage.output_tokens, total_tokens: usage.input_tokens + usage.output_tokens } })}\n\n`);
    res.end('data: [DONE]\n\n');
  });
}

/** An Anthropic Messages server at `<url>/v1`, requiring the key (`x-api-key`, or `Authorization: Bearer`). */
export function startAnthropicServer(apiKey: string): Promise<LlmServer> {
  return serve(async (req, body, res, state) => {
    // The API takes the key as x-api-key or as a bearer token (what the current SDK sends).
    if (req.headers['x-api-key'] !== apiKey && req.headers.authorization !== `Bearer ${apiKey}`) return json(res, 401, { type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } });
    const path = (req.url ?? '').replace(/\?.*$/, '');
    if (req.method === 'GET' && path === '/v1/models') return json(res, 200, { data: [{ type: 'model', id: 'claude-test', display_name: 'Claude Test', created_at: '2025-01-01T00:00:00Z' }], has_more: false, first_id: 'claude-test', last_id: 'claude-test' });
    if (req.method !== 'POST' || path !== '/v1/messages') return json(res, 404, { type: 'error', error: { type: 'not_found_error', message: `no route ${path}` } });
    const answer = textOf(state.script.shift() ?? { text: `You said: ${lastUserText(body.messages)}` });
    if (answer.delayMs) await sleep(answer.delayMs);
    if (answer.status) return json(res, answer.status, { type: 'error', error: { type: 'api_error', message: `scripted failure ${answer.status}` } });
    const usage = answer.usage ?? { input_tokens: 15, output_tokens: 9 };
    const toolUses = (answer.tool_calls ?? []).map((c, i) => ({ type: 'tool_use', id: `toolu_${i}_${crypto.randomUUID().slice(0, 8)}`, name: c.name, input: c.arguments }));
    const content = [...(answer.text ? [{ type: 'text', text: answer.text }] : []), ...toolUses];
    const stop = toolUses.length ? 'tool_use' : 'end_turn';
    const id = `msg_${crypto.randomUUID()}`;
    if (!body.stream) return json(res, 200, { id, type: 'message', role: 'assistant', model: body.model, content, stop_reason: stop, stop_sequence: null, usage });
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const event = (type: string, data: object) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    event('message_start', { message: { id, type: 'message', role: 'assistant', model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: usage.input_tokens, output_tokens: 1 } } });
    let index = 0;
    if (answer.text) {
      event('content_block_start', { index, content_block: { type: 'text', text: '' } });
      for (const piece of answer.pieces ?? [answer.text]) {
        event('content_block_delta', { index, delta: { type: 'text_delta', text: piece } });
        await sleep(5);
      }
      event('content_block_stop', { index });
      index += 1;
    }
    for (const use of toolUses) {
      const args = JSON.stringify(use.input);
      event('content_block_start', { index, content_block: { type: 'tool_use', id: use.id, name: use.name, input: {} } });
      event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: args.slice(0, Math.floor(args.length / 2)) } });
      event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: args.slice(Math.floor(args.length / 2)) } });
      event('content_block_stop', { index });
      index += 1;
    }
    event('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: usage.output_tokens } });
    event('message_stop', {});
    res.end();
  });
}
