import { actingUserId, defineRoute, eventStream, HttpProblem, identitySchemas as s, problems, reply, z, type FieldError, type Principal, type ServerSentEvent } from '../../kernel/plugin-api.ts';
import type { AgentToolRunner } from '../agent_tools/public.ts';
import type { ChatMessage, LlmMesh, ToolDefinition } from '../llm_mesh/public.ts';
import { agentLoop, type AgentEvent } from './agent-loop.ts';
import type { Conversation, ConversationStore, Owner, StoredMessage } from './conversation-store.ts';
import { groundingMessage, SOURCES_PER_MESSAGE, sourcesOf } from './grounding.ts';
import type { ChatGrounding, GroundingPassage } from './public.ts';

export interface ChatRouteDeps {
  store: ConversationStore;
  mesh: LlmMesh;
  tools: AgentToolRunner;
  maxToolSteps: number;
  /** What grounds conversations in knowledge bases in the organization, when a plugin enabled there offers it. */
  groundingIn(orgId: number): Promise<ChatGrounding | undefined>;
}

const base = { security: 'bearer', orgScoped: true, capability: 'chat.use' } as const;
const idParams = s.idParam('id');

const conversationBody = z
  .object({
    title: z.string().trim().min(1).max(200).default('New conversation'),
    connection_id: s.recordId.describe('The LLM connection the assistant answers through (GET /api/llm-mesh/connections)'),
    model: z.string().min(1).max(200).nullable().default(null).describe('Default: the connection\u2019s default_model'),
    system_prompt: z.string().max(100_000).nullable().default(null),
    tools: z.array(z.string().max(64)).max(64).default([]).describe('Agent tools the assistant may call (GET /api/agent-tools), run with your rights'),
    knowledge_base_ids: z
      .array(s.recordId)
      .max(16)
      .default([])
      .refine((ids) => new Set(ids).size === ids.length, 'lists a knowledge base twice')
      .describe('Knowledge bases searched for each of your messages; the passages found are given to the assistant to cite as [n], and listed as the reply’s `sources`'),
  })
  .strict();

const conversationSchema = z
  .object({
    id: z.number().int(),
    title: z.string(),
    connection_id: z.number().int(),
    model: z.string().nullable(),
    system_prompt: z.string().nullable(),
    tools: z.array(z.string()),
    knowledge_base_ids: z.array(z.number().int()),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'ChatConversation' });
const sourceSchema = z
  .object({ n: z.number().int(), knowledge_base_id: z.number().int(), document_id: z.number().int(), document_name: z.string(), chunk_id: z.number().int(), excerpt: z.string() })
  .meta({ id: 'ChatSource', description: 'A passage of a knowledge base the reply cites as [n]' });
const messageSchema = z
  .object({
    id: z.number().int(),
    role: z.enum(['system', 'user', 'assistant', 'tool']),
    content: z.string().nullable(),
    tool_calls: z.array(z.object({ id: z.string(), name: z.string(), arguments: z.string() })).nullable(),
    tool_call_id: z.string().nullable(),
    tool_name: z.string().nullable(),
    usage: z.object({ input_tokens: z.number().int(), output_tokens: z.number().int() }).nullable(),
    sources: z.array(sourceSchema).nullable().describe('The sources an assistant’s reply cites as [n]'),
    created_at: z.string(),
  })
  .meta({ id: 'ChatMessage' });
const toolCallSchema = z.object({ id: z.string(), name: z.string(), arguments: z.unknown(), result: z.unknown().optional(), error: z.object({ status: z.number().int(), detail: z.string() }).optional() });
const replySchema = z
  .object({
    message: z.object({ role: z.literal('assistant'), content: z.string().nullable() }),
    tool_calls: z.array(toolCallSchema),
    model_calls: z.number().int(),
    usage: z.object({ input_tokens: z.number().int(), output_tokens: z.number().int() }),
    cost_usd: z.number(),
    sources: z.array(sourceSchema).describe('The passages of the conversation’s knowledge bases found for the message, which the reply cites as [n]; empty without knowledge bases, or when none was found'),
  })
  .meta({ id: 'ChatReply' });

/** The model's view of the conversation: the system prompt, then every stored turn. */
function historyOf(conversation: Conversation, stored: StoredMessage[]): ChatMessage[] {
  return [
    ...(conversation.system_prompt ? [{ role: 'system' as const, content: conversation.system_prompt }] : []),
    ...stored.map((m) => ({ role: m.role, content: m.content, ...(m.tool_calls ? { tool_calls: m.tool_calls } : {}), ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}) })),
  ];
}

export function chatRoutes({ store, mesh, tools, maxToolSteps, groundingIn }: ChatRouteDeps) {
  const ownerOf = (orgId: number, principal: Principal): Owner => ({ orgId, userId: actingUserId(principal)! });

  /** The conversation's tools as the caller may call them now, in the shape a model is given. */
  async function toolsFor(conversation: Conversation, orgId: number, principal: Principal): Promise<ToolDefinition[]> {
    const offered = await tools.list({ orgId, principal });
    return offered.filter((t) => conversation.tools.includes(t.function.name)).map((t) => t.function);
  }

  async function checkedBody(body: z.output<typeof conversationBody>, orgId: number, principal: Principal) {
    const errors: FieldError[] = [];
    const connection = await mesh.connection(orgId, body.connection_id);
    if (!connection) errors.push({ path: 'body.connection_id', message: 'no such LLM connection in this organization' });
    else if (body.model !== null && connection.models.length && !connection.models.includes(body.model)) errors.push({ path: 'body.model', message: `not one the connection offers (${connection.models.join(', ')})` });
    const offered = new Set((await tools.list({ orgId, principal })).map((t) => t.function.name));
    body.tools.forEach((name, i) => {
      if (!offered.has(name)) errors.push({ path: `body.tools.${i}`, message: `no agent tool "${name}" you may call here` });
    });
    if (body.knowledge_base_ids.length) {
      const grounding = await groundingIn(orgId);
      if (!grounding) errors.push({ path: 'body.knowledge_base_ids', message: 'knowledge bases are not offered in this organization' });
      else {
        const refused = await grounding.refusals({ orgId, principal }, body.knowledge_base_ids);
        body.knowledge_base_ids.forEach((id, i) => {
          if (refused.has(id)) errors.push({ path: `body.knowledge_base_ids.${i}`, message: refused.get(id)! });
        });
      }
    }
    if (errors.length) throw problems.invalidFields(errors);
  }

  /** The passages of the conversation's knowledge bases found for `message` (none without bases). */
  async function passagesFor(conversation: Conversation, message: string, caller: { orgId: number; principal: Principal; requestId: string }): Promise<GroundingPassage[] | null> {
    if (!conversation.knowledge_base_ids.length) return null;
    const grounding = await groundingIn(caller.orgId);
    if (!grounding) throw problems.unprocessable('this conversation searches knowledge bases, which are not offered in this organization any more: start a conversation without them');
    return grounding.passages(caller, conversation.knowledge_base_ids, message, SOURCES_PER_MESSAGE);
  }

  return [
    defineRoute({
      ...base,
      method: 'post',
      path: '/conversations',
      summary: 'Start a conversation',
      description: 'Yours alone: nobody else sees it. The assistant answers through the LLM connection, and may call the tools listed (each run with your rights).',
      request: { body: conversationBody },
      responses: { 201: { description: 'The conversation', schema: conversationSchema } },
      handler: async ({ body, orgId, principal }) => {
        await checkedBody(body, orgId, principal);
        return reply(201, await store.create(ownerOf(orgId, principal), body));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/conversations',
      summary: 'Your conversations',
      description: 'In this organization, the most recently used first.',
      responses: { 200: { description: 'The conversations', schema: z.object({ items: z.array(conversationSchema) }) } },
      handler: async ({ orgId, principal }) => ({ items: await store.list(ownerOf(orgId, principal)) }),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/conversations/{id}',
      summary: 'A conversation with its messages',
      description: 'Every turn: yours, the assistant\u2019s (with the tool calls it asked for), and the tools\u2019 answers.',
      request: { params: idParams },
      responses: { 200: { description: 'The conversation', schema: conversationSchema.extend({ messages: z.array(messageSchema) }) } },
      handler: async ({ params, orgId, principal }) => {
        const conversation = await store.get(ownerOf(orgId, principal), params.id);
        return { ...conversation, messages: await store.messages(conversation.id) };
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/conversations/{id}',
      summary: 'Delete a conversation',
      description: 'With every message of it; the model calls it made stay in the LLM mesh\u2019s traces and usage.',
      request: { params: idParams },
      responses: { 204: { description: 'Deleted, with its messages' } },
      handler: async ({ params, orgId, principal }) => {
        await store.remove(ownerOf(orgId, principal), params.id);
        return reply(204);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/conversations/{id}/messages',
      summary: 'Send a message',
      description:
        'The assistant\u2019s reply after its agent loop: while the model asks for tools, each is run with your rights and its answer fed back, at most CHAT_MAX_TOOL_STEPS rounds. Every model call goes through the LLM mesh (guardrails, quotas, rate limits, traces). The reply lists the tool calls made and, in a conversation with knowledge bases, the `sources` its [n] cite (the passages found for this message). With `stream: true`, Server-Sent Events: `sources` {sources} first when there are any, `delta` {text}, `tool_call` {id, name, arguments}, `tool_result` {id, name, result | error}, then `done` (the reply) or `error` (a problem). The exchange is kept once the reply is complete.',
      request: { params: idParams, body: z.object({ content: z.string().min(1).max(100_000), stream: z.boolean().default(false) }).strict() },
      responses: {
        200: { description: 'The reply, or its stream', content: { 'application/json': replySchema, 'text/event-stream': z.string() } },
        422: { description: 'The conversation names knowledge bases, which are not offered in this organization any more' },
        429: { description: 'A quota is spent, or a rate limit reached' },
        502: { description: 'The model\u2019s provider failed' },
      },
      handler: async ({ params, body, orgId, principal, audit, requestId, log }) => {
        const conversation = await store.get(ownerOf(orgId, principal), params.id);
        const history = historyOf(conversation, await store.messages(conversation.id));
        const passages = await passagesFor(conversation, body.content, { orgId, principal, requestId });
        const events = agentLoop(mesh, tools, {
          caller: { orgId, principal, requestId },
          toolContext: { orgId, principal, audit, requestId },
          connectionId: conversation.connection_id,
          model: conversation.model ?? undefined,
          messages: [...history, ...(passages ? [groundingMessage(passages)] : []), { role: 'user', content: body.content }],
          tools: await toolsFor(conversation, orgId, principal),
          stream: body.stream,
          maxToolSteps,
          sources: sourcesOf(passages ?? []),
        });
        const userTurn = { role: 'user' as const, content: body.content, tool_calls: null, tool_call_id: null, tool_name: null, usage: null, sources: null };
        const keep = (event: Extract<AgentEvent, { type: 'done' }>) => store.append(conversation.id, [userTurn, ...event.turns]);
        if (!body.stream) {
          for await (const event of events) {
            if (event.type !== 'done') continue;
            await keep(event);
            return event.reply;
          }
          throw new HttpProblem(502, 'the reply ended without an answer');
        }
        return eventStream(replyEvents(events, keep), { requestId, log, failed: 'the reply failed midway' });
      },
    }),
  ];
}

/** A streamed reply's events as they happen; the exchange is kept when its `done` comes. */
async function* replyEvents(events: AsyncIterable<AgentEvent>, keep: (done: Extract<AgentEvent, { type: 'done' }>) => Promise<void>): AsyncGenerator<ServerSentEvent> {
  for await (const event of events) {
    if (event.type === 'done') {
      await keep(event);
      yield { event: 'done', data: event.reply };
    } else {
      const { type, ...data } = event;
      yield { event: type, data };
    }
  }
}
