import OpenAI, { AzureOpenAI } from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { definePlugin } from '../../kernel/plugin-api.ts';
import { modelIds, streamedCompletion } from './streamed.ts';
import { llmProviders, type ChatMessage, type Completion, type CompletionRequest, type FinishReason, type LlmProviderContribution, type ProviderConnection, type ToolCall } from '../llm_mesh/public.ts';

/**
 * The SDK's client on the connection: its key, its server, the platform's guarded fetch; the mesh
 * decides on retries (none here). With `options.api_version` the server is Azure OpenAI, and the
 * SDK's Azure client speaks its dialect: the key in an `api-key` header, `?api-version=` on every
 * call, and the model named as the deployment in the path (`{base_url}/deployments/{model}/…`).
 */
function client(connection: ProviderConnection): OpenAI {
  const settings = { apiKey: connection.api_key ?? 'none', baseURL: connection.base_url ?? undefined, fetch: connection.fetch, timeout: connection.timeoutMs, maxRetries: 0 };
  const apiVersion = connection.options.api_version;
  return typeof apiVersion === 'string' ? new AzureOpenAI({ ...settings, apiVersion }) : new OpenAI(settings);
}

const wireMessage = (message: ChatMessage): ChatCompletionMessageParam => {
  if (message.role === 'tool') return { role: 'tool', tool_call_id: message.tool_call_id ?? '', content: message.content ?? '' };
  if (message.role === 'assistant') {
    return {
      role: 'assistant',
      content: message.content,
      ...(message.tool_calls?.length ? { tool_calls: message.tool_calls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })) } : {}),
    };
  }
  return { role: message.role, content: message.content ?? '' };
};

const wireTools = (request: CompletionRequest): ChatCompletionTool[] | undefined =>
  request.tools?.length ? request.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } })) : undefined;

/** The request body both calls share; `max_tokens` is what every OpenAI-compatible server reads (OpenAI's newer models: options.max_completion_tokens). */
function body(connection: ProviderConnection, request: CompletionRequest) {
  const limit = request.max_tokens === undefined ? {} : connection.options.max_completion_tokens === true ? { max_completion_tokens: request.max_tokens } : { max_tokens: request.max_tokens };
  return { model: request.model, messages: request.messages.map(wireMessage), ...(request.temperature === undefined ? {} : { temperature: request.temperature }), ...limit, ...(wireTools(request) ? { tools: wireTools(request) } : {}) };
}

const finishOf = (reason: string | null | undefined): FinishReason => (reason === 'length' ? 'length' : reason === 'tool_calls' || reason === 'function_call' ? 'tool_calls' : reason === 'content_filter' ? 'content_filter' : 'stop');

const provider: LlmProviderContribution = {
  id: 'openai_compatible',
  description: 'The OpenAI chat completions, embeddings and models API, as OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp server and LM Studio speak it',
  default_base_url: 'https://api.openai.com/v1',
  requires_api_key: false,
  async complete(connection, request): Promise<Completion> {
    const answer = await client(connection).chat.completions.create({ ...body(connection, request), stream: false }, { signal: request.signal });
    const choice = answer.choices[0];
    const toolCalls: ToolCall[] = (choice?.message.tool_calls ?? []).flatMap((c) => (c.type === 'function' ? [{ id: c.id, name: c.function.name, arguments: c.function.arguments }] : []));
    return {
      model: answer.model,
      message: { role: 'assistant', content: choice?.message.content ?? null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
      finish_reason: finishOf(choice?.finish_reason),
      usage: { input_tokens: answer.usage?.prompt_tokens ?? 0, output_tokens: answer.usage?.completion_tokens ?? 0 },
    };
  },
  async *stream(connection, request) {
    const stream = await client(connection).chat.completions.create({ ...body(connection, request), stream: true, stream_options: { include_usage: true } }, { signal: request.signal });
    let model = request.model;
    let text = '';
    let finish: string | null = null;
    let usage = { input_tokens: 0, output_tokens: 0 };
    // Tool calls arrive in pieces keyed by their index: the first names the call, the rest add to its arguments.
    const calls: ToolCall[] = [];
    for await (const chunk of stream as AsyncIterable<ChatCompletionChunk>) {
      model = chunk.model || model;
      if (chunk.usage) usage = { input_tokens: chunk.usage.prompt_tokens ?? 0, output_tokens: chunk.usage.completion_tokens ?? 0 };
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.finish_reason) finish = choice.finish_reason;
      for (const piece of choice.delta.tool_calls ?? []) {
        const call = (calls[piece.index] ??= { id: '', name: '', arguments: '' });
        if (piece.id) call.id = piece.id;
        if (piece.function?.name) call.name += piece.function.name;
        if (piece.function?.arguments) call.arguments += piece.function.arguments;
      }
      if (choice.delta.content) {
        text += choice.delta.content;
        yield { type: 'delta', text: choice.delta.content };
      }
    }
    const toolCalls = calls.filter(Boolean);
    yield { type: 'done', completion: streamedCompletion(model, text, toolCalls, finishOf(finish), usage) };
  },
  async embed(connection, request) {
    const answer = await client(connection).embeddings.create({ model: request.model, input: request.input, encoding_format: 'float' }, { signal: request.signal });
    const vectors = [...answer.data].sort((a, b) => a.index - b.index).map((d) => d.embedding);
    return { vectors, usage: { input_tokens: answer.usage?.prompt_tokens ?? 0 } };
  },
  models: (connection) => modelIds(client(connection).models.list()),
};

/** The `openai_compatible` LLM provider, through OpenAI's official SDK. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => ctx.contribute(llmProviders, provider),
});
