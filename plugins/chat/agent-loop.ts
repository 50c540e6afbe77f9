import { HttpProblem, withFieldsRenamed } from '../../kernel/plugin-api.ts';
import type { AgentToolRunner, ToolContext } from '../agent_tools/public.ts';
import type { ChatMessage, LlmMesh, MeshCaller, MeshCompletion, TokenUsage, ToolDefinition } from '../llm_mesh/public.ts';
import type { ChatSource, StoredMessage } from './conversation-store.ts';

/** A tool call made during one reply, with what it answered or why it failed. */
export interface MadeToolCall {
  id: string;
  name: string;
  arguments: unknown;
  result?: unknown;
  error?: { status: number; detail: string };
}

export interface AgentReply {
  message: { role: 'assistant'; content: string | null };
  tool_calls: MadeToolCall[];
  /** Model calls made (each tool round is one more). */
  model_calls: number;
  usage: TokenUsage;
  cost_usd: number;
  /** What the reply was given to cite as [n] (the conversation's knowledge bases); empty without them. */
  sources: ChatSource[];
}

export type AgentEvent =
  | { type: 'sources'; sources: ChatSource[] }
  | { type: 'delta'; text: string }
  | { type: 'tool_call'; id: string; name: string; arguments: unknown }
  | { type: 'tool_result'; id: string; name: string; result?: unknown; error?: { status: number; detail: string } }
  | { type: 'done'; reply: AgentReply; turns: Omit<StoredMessage, 'id' | 'created_at'>[] };

export interface AgentLoopInput {
  caller: MeshCaller;
  toolContext: ToolContext;
  connectionId: number;
  model: string | undefined;
  /** The conversation so far (system prompt first), and the user's new message last. */
  messages: ChatMessage[];
  /** The tools the conversation may call, as the model is given them. */
  tools: ToolDefinition[];
  stream: boolean;
  maxToolSteps: number;
  /** The sources the messages give the model to cite (told first, kept with the reply). */
  sources: ChatSource[];
}

/** A tool's answer as the model reads it: JSON, cut at this many characters (a model's context is finite). */
const MAX_TOOL_RESULT_CHARS = 20_000;

const asText = (value: unknown) => {
  const text = JSON.stringify(value) ?? 'null';
  return text.length > MAX_TOOL_RESULT_CHARS ? `${text.slice(0, MAX_TOOL_RESULT_CHARS)}… (cut at ${MAX_TOOL_RESULT_CHARS} characters)` : text;
};

/**
 * One reply of the assistant: the model is asked; while it asks for tools, each is run as the user
 * (through the agent tools' runner: its checks, its audit) and its answer fed back, at most
 * `maxToolSteps` rounds; after them it is asked once more without tools, so it answers in words.
 * Every model call goes through the mesh (guardrails, quotas, limits, traces). Yields what happens
 * as it happens; the last event holds the reply and the turns to keep.
 */
export async function* agentLoop(mesh: LlmMesh, runner: AgentToolRunner, input: AgentLoopInput): AsyncGenerator<AgentEvent> {
  const messages = [...input.messages];
  const turns: Omit<StoredMessage, 'id' | 'created_at'>[] = [];
  const calls: MadeToolCall[] = [];
  const usage = { input_tokens: 0, output_tokens: 0 };
  let cost = 0;
  let modelCalls = 0;
  if (input.sources.length) yield { type: 'sources', sources: input.sources };
  for (let step = 0; ; step++) {
    const offerTools = input.tools.length > 0 && step < input.maxToolSteps;
    const request = { connection_id: input.connectionId, model: input.model, messages, ...(offerTools ? { tools: input.tools } : {}) };
    let completion: MeshCompletion | undefined;
    try {
      if (input.stream) {
        for await (const chunk of await mesh.stream(input.caller, request)) {
          if (chunk.type === 'delta') yield { type: 'delta', text: chunk.text };
          else completion = chunk.completion;
        }
      } else {
        completion = await mesh.complete(input.caller, request);
      }
    } catch (err) {
      throw promptFieldsRenamed(err, input.messages.length - 1);
    }
    if (!completion) throw new HttpProblem(502, 'the model\u2019s stream ended without a completion');
    modelCalls++;
    usage.input_tokens += completion.usage.input_tokens;
    usage.output_tokens += completion.usage.output_tokens;
    cost += completion.cost_usd;
    const asked = offerTools ? (completion.message.tool_calls ?? []) : [];
    // The reply (the turn asking no tools) keeps the sources its [n] point into.
    const sources = !asked.length && input.sources.length ? input.sources : null;
    turns.push({ role: 'assistant', content: completion.message.content, tool_calls: asked.length ? asked : null, tool_call_id: null, tool_name: null, usage: completion.usage, sources });
    messages.push({ role: 'assistant', content: completion.message.content, ...(asked.length ? { tool_calls: asked } : {}) });
    if (!asked.length) {
      const reply: AgentReply = { message: { role: 'assistant', content: completion.message.content }, tool_calls: calls, model_calls: modelCalls, usage, cost_usd: cost, sources: input.sources };
      yield { type: 'done', reply, turns };
      return;
    }
    for (const call of asked) {
      const made = await runTool(runner, input, call);
      calls.push(made);
      yield { type: 'tool_call', id: call.id, name: call.name, arguments: made.arguments };
      yield { type: 'tool_result', id: call.id, name: call.name, ...(made.error ? { error: made.error } : { result: made.result }) };
      const content = asText(made.error ? { error: made.error.detail, status: made.error.status } : made.result);
      turns.push({ role: 'tool', content, tool_calls: null, tool_call_id: call.id, tool_name: call.name, usage: null, sources: null });
      messages.push({ role: 'tool', content, tool_call_id: call.id });
    }
  }
}

/**
 * A guardrail's refusal of the prompt names the mesh's fields (`body.messages.3.content`), which the
 * chat's caller never sent: named instead as what they are here, the message just sent
 * (`body.content`), the conversation so far (`conversation`: an earlier turn, its size), or a tool's
 * answer in this reply (`tool_results`).
 */
function promptFieldsRenamed(err: unknown, userIndex: number): unknown {
  return withFieldsRenamed(err, (path) => {
    if (path === 'body.messages') return 'conversation';
    const index = /^body\.messages\.(\d+)\.content$/.exec(path)?.[1];
    if (index === undefined) return path;
    return Number(index) === userIndex ? 'body.content' : Number(index) < userIndex ? 'conversation' : 'tool_results';
  });
}

/** Runs one tool call as the user; what fails (a bad argument, a refusal) is told to the model rather than ending the reply. */
async function runTool(runner: AgentToolRunner, input: AgentLoopInput, call: { id: string; name: string; arguments: string }): Promise<MadeToolCall> {
  let args: unknown;
  try {
    args = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
  } catch {
    return { id: call.id, name: call.name, arguments: call.arguments, error: { status: 400, detail: 'the arguments are not valid JSON' } };
  }
  if (!input.tools.some((t) => t.name === call.name)) return { id: call.id, name: call.name, arguments: args, error: { status: 404, detail: `no tool "${call.name}" in this conversation` } };
  try {
    return { id: call.id, name: call.name, arguments: args, result: await runner.invoke(call.name, args, input.toolContext, 'arguments') };
  } catch (err) {
    if (!(err instanceof HttpProblem)) throw err;
    return { id: call.id, name: call.name, arguments: args, error: { status: err.status, detail: err.detail } };
  }
}
