import Anthropic from '@anthropic-ai/sdk';
import type { ContentBlockParam, MessageParam, RawMessageStreamEvent, Tool } from '@anthropic-ai/sdk/resources/messages/messages';
import { definePlugin } from '../../kernel/plugin-api.ts';
import { modelIds, streamedCompletion } from './streamed.ts';
import { llmProviders, type ChatMessage, type Completion, type CompletionRequest, type FinishReason, type LlmProviderContribution, type ProviderConnection, type ToolCall } from '../llm_mesh/public.ts';

/** Anthropic requires max_tokens; a call that names none may write this many. */
const DEFAULT_MAX_TOKENS = 4096;

function client(connection: ProviderConnection): Anthropic {
  return new Anthropic({ apiKey: connection.api_key ?? undefined, baseURL: connection.base_url ?? undefined, fetch: connection.fetch, timeout: connection.timeoutMs, maxRetries: 0 });
}

/** A tool call's arguments as Anthropic takes them: an object (text that does not parse goes as `{}`, as the model wrote nothing usable). */
function argumentsObject(text: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

/**
 * The messages as Anthropic's Messages API takes them: the system prompt apart, tool results as
 * `tool_result` blocks of a user turn (consecutive ones in one turn), tool calls as `tool_use` blocks.
 */
function wire(messages: ChatMessage[]): { system: string | undefined; messages: MessageParam[] } {
  const system = messages.filter((m) => m.role === 'system').map((m) => m.content ?? '').join('\n\n') || undefined;
  const out: MessageParam[] = [];
  for (const message of messages) {
    if (message.role === 'system') continue;
    if (message.role === 'tool') {
      const block: ContentBlockParam = { type: 'tool_result', tool_use_id: message.tool_call_id ?? '', content: message.content ?? '' };
      const last = out[out.length - 1];
      if (last?.role === 'user' && Array.isArray(last.content) && last.content.every((b) => b.type === 'tool_result')) last.content.push(block);
      else out.push({ role: 'user', content: [block] });
      continue;
    }
    if (message.role === 'assistant' && message.tool_calls?.length) {
      const blocks: ContentBlockParam[] = [...(message.content ? [{ type: 'text' as const, text: message.content }] : []), ...message.tool_calls.map((c) => ({ type: 'tool_use' as const, id: c.id, name: c.name, input: argumentsObject(c.arguments) }))];
      out.push({ role: 'assistant', content: blocks });
      continue;
    }
    out.push({ role: message.role === 'assistant' ? 'assistant' : 'user', content: message.content ?? '' });
  }
  return { system, messages: out };
}

function params(request: CompletionRequest) {
  const { system, messages } = wire(request.messages);
  const tools: Tool[] | undefined = request.tools?.length ? request.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.parameters as Tool['input_schema'] })) : undefined;
  return { model: request.model, max_tokens: request.max_tokens ?? DEFAULT_MAX_TOKENS, messages, ...(system ? { system } : {}), ...(request.temperature === undefined ? {} : { temperature: request.temperature }), ...(tools ? { tools } : {}) };
}

const finishOf = (reason: string | null | undefined): FinishReason => (reason === 'max_tokens' ? 'length' : reason === 'tool_use' ? 'tool_calls' : reason === 'refusal' ? 'content_filter' : 'stop');

const provider: LlmProviderContribution = {
  id: 'anthropic',
  description: 'Anthropic\u2019s Messages API (Claude models)',
  default_base_url: 'https://api.anthropic.com',
  requires_api_key: true,
  async complete(connection, request): Promise<Completion> {
    const answer = await client(connection).messages.create({ ...params(request), stream: false }, { signal: request.signal });
    const text = answer.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');
    const toolCalls: ToolCall[] = answer.content.flatMap((b) => (b.type === 'tool_use' ? [{ id: b.id, name: b.name, arguments: JSON.stringify(b.input) }] : []));
    return {
      model: answer.model,
      message: { role: 'assistant', content: text || (toolCalls.length ? null : ''), ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
      finish_reason: finishOf(answer.stop_reason),
      usage: { input_tokens: answer.usage.input_tokens, output_tokens: answer.usage.output_tokens },
    };
  },
  async *stream(connection, request) {
    const events = await client(connection).messages.create({ ...params(request), stream: true }, { signal: request.signal });
    let model = request.model;
    let text = '';
    let finish: string | null = null;
    const usage = { input_tokens: 0, output_tokens: 0 };
    // Content blocks by index: a tool_use block's input arrives as pieces of JSON text.
    const calls = new Map<number, ToolCall>();
    for await (const event of events as AsyncIterable<RawMessageStreamEvent>) {
      if (event.type === 'message_start') {
        model = event.message.model || model;
        usage.input_tokens = event.message.usage.input_tokens;
        usage.output_tokens = event.message.usage.output_tokens;
      } else if (event.type === 'content_block_start' && event.content_block.type === 'tool_use') {
        calls.set(event.index, { id: event.content_block.id, name: event.content_block.name, arguments: '' });
      } else if (event.type === 'content_block_delta') {
        if (event.delta.type === 'text_delta') {
          text += event.delta.text;
          yield { type: 'delta', text: event.delta.text };
        } else if (event.delta.type === 'input_json_delta') {
          const call = calls.get(event.index);
          if (call) call.arguments += event.delta.partial_json;
        }
      } else if (event.type === 'message_delta') {
        finish = event.delta.stop_reason ?? finish;
        usage.output_tokens = event.usage.output_tokens;
      }
    }
    const toolCalls = [...calls.values()].map((c) => ({ ...c, arguments: c.arguments || '{}' }));
    yield { type: 'done', completion: streamedCompletion(model, text, toolCalls, finishOf(finish), usage) };
  },
  models: (connection) => modelIds(client(connection).models.list()),
};

/** The `anthropic` LLM provider, through Anthropic's official SDK (no embeddings: Anthropic offers none). */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => ctx.contribute(llmProviders, provider),
});
