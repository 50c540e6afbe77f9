import type { Completion, FinishReason, TokenUsage, ToolCall } from '../llm_mesh/public.ts';

/** The whole completion a provider's stream ends with, assembled from its text, tool calls, finish and usage. */
export function streamedCompletion(model: string, text: string, toolCalls: ToolCall[], finish: FinishReason, usage: TokenUsage): Completion {
  return { model, message: { role: 'assistant', content: toolCalls.length && !text ? null : text, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) }, finish_reason: finish, usage };
}

/** The ids of a models listing, every page of it (both SDKs page it as an async iterable). */
export async function modelIds(pages: AsyncIterable<{ id: string }>): Promise<string[]> {
  const ids: string[] = [];
  for await (const model of pages) ids.push(model.id);
  return ids;
}
