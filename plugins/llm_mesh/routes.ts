import { defineRoute, eventStream, identitySchemas as s, kernelServices, OutboundRefusedError, problems, reply, z, type FieldError, type ServerSentEvent, type ServiceType } from '../../kernel/plugin-api.ts';
import type { ProjectCatalog } from '../projects/public.ts';
import { USAGE_GROUPS, type CallLog } from './call-log.ts';
import { answerOf, connectionConfigSchema, rateLimitsSchema, type ConnectionRecord, type ConnectionStore, type ConnectionWrite } from './connection-store.ts';
import { guardrailsSchema, patternErrors } from './guardrails.ts';
import type { Mesh } from './mesh.ts';
import type { Providers } from './providers.ts';
import type { MeshCaller, MeshChunk } from './public.ts';
import { quotaInputSchema, type Quotas } from './quotas.ts';

export interface MeshRouteDeps {
  connections: ConnectionStore;
  providers: Providers;
  mesh: Mesh;
  calls: CallLog;
  quotas: Quotas;
  projects: ProjectCatalog;
  vault: ServiceType<typeof kernelServices.vault>;
  outbound: ServiceType<typeof kernelServices.outbound>;
}

const manage = { security: 'bearer', orgScoped: true, capability: 'llm_mesh.manage' } as const;
const use = { security: 'bearer', orgScoped: true, capability: 'llm_mesh.use' } as const;
const idParams = s.idParam('id');
const instant = z.iso.datetime({ offset: true }).max(40);

const connectionName = z.string().trim().min(1).max(100);
const connectionBody = z
  .object({
    name: connectionName,
    provider: z.string().max(63).describe('A provider offered here (GET /api/llm-mesh/providers): openai_compatible, anthropic'),
    config: connectionConfigSchema.default(connectionConfigSchema.parse({})),
    guardrails: guardrailsSchema.default(guardrailsSchema.parse({})),
    rate_limits: rateLimitsSchema.default(rateLimitsSchema.parse({})),
    log_prompts: z.boolean().default(false).describe('Keep each call\u2019s prompt and answer in its trace (GET /api/llm-mesh/calls); off: only counts and outcomes'),
  })
  .strict();

/** A change: the fields given replace the saved ones; none has a default here (a default would overwrite what is saved). */
const connectionPatch = z
  .object({
    name: connectionName.optional(),
    provider: connectionBody.shape.provider.optional(),
    config: connectionConfigSchema.optional(),
    guardrails: guardrailsSchema.optional(),
    rate_limits: rateLimitsSchema.optional(),
    log_prompts: z.boolean().optional(),
  })
  .strict();

const connectionSchema = z
  .object({
    id: z.number().int(),
    name: z.string(),
    provider: z.string(),
    config: z.record(z.string(), z.unknown()).describe('As saved; api_key shown as ******** when set'),
    guardrails: z.record(z.string(), z.unknown()),
    rate_limits: z.record(z.string(), z.unknown()),
    log_prompts: z.boolean(),
    created_by: z.number().int().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'LlmConnection' });

const toolCall = z.object({ id: z.string().max(200), name: z.string().max(64), arguments: z.string().max(1_000_000) }).strict();
const message = z
  .object({
    role: z.enum(['system', 'user', 'assistant', 'tool']),
    content: z.string().nullable(),
    tool_calls: z.array(toolCall).max(64).optional(),
    tool_call_id: z.string().max(200).optional(),
  })
  .strict();
const tool = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, _ or -'),
    description: z.string().max(4000),
    parameters: z.record(z.string(), z.unknown()).describe('JSON Schema of the arguments'),
  })
  .strict();
const projectId = s.recordId.optional().describe('The project the call is for: counted under it in usage and project quotas');
const completionBody = z
  .object({
    connection_id: s.recordId,
    model: z.string().min(1).max(200).optional().describe('Default: the connection\u2019s default_model'),
    messages: z.array(message).min(1).max(1000),
    temperature: z.number().min(0).max(2).optional(),
    max_tokens: z.number().int().min(1).max(1_000_000).optional(),
    tools: z.array(tool).max(128).optional(),
    stream: z.boolean().default(false).describe('Answer as Server-Sent Events: `delta` {text} events, then `done` with the whole completion (or `error` with a problem)'),
    project_id: projectId,
  })
  .strict();

const outcomeSchema = z.object({ guardrail: z.string(), stage: z.enum(['prompt', 'answer']), kind: z.string(), action: z.string(), count: z.number().int() }).meta({ id: 'LlmGuardrailOutcome' });
const completionSchema = z
  .object({
    id: z.string(),
    model: z.string(),
    message: z.object({ role: z.literal('assistant'), content: z.string().nullable(), tool_calls: z.array(toolCall).optional() }),
    finish_reason: z.string(),
    usage: z.object({ input_tokens: z.number().int(), output_tokens: z.number().int() }),
    cost_usd: z.number(),
    guardrails: z.array(outcomeSchema),
  })
  .meta({ id: 'LlmCompletion' });

export function meshRoutes({ connections, providers, mesh, calls, quotas, projects, vault, outbound }: MeshRouteDeps) {
  /** A connection's body checked against what is offered here: its provider, its base URL, its key, its patterns. */
  async function checked(orgId: number, body: z.output<typeof connectionBody>, current: ConnectionRecord | null, apiKey: string | null | undefined): Promise<ConnectionWrite> {
    const errors: FieldError[] = [];
    const provider = await providers.get(orgId, body.provider);
    if (!provider) errors.push({ path: 'body.provider', message: `not a provider offered here (${(await providers.described(orgId)).map((p) => p.id).join(', ')})` });
    if (body.config.base_url !== null) {
      try {
        outbound.httpTarget(body.config.base_url);
      } catch (err) {
        if (!(err instanceof OutboundRefusedError)) throw err;
        errors.push({ path: 'body.config.base_url', message: err.message });
      }
    }
    const sealed = apiKey === undefined ? (current?.api_key_sealed ?? null) : apiKey === null ? null : vault.seal(apiKey);
    if (provider?.requires_api_key && sealed === null) errors.push({ path: 'body.config.api_key', message: `the provider "${provider.id}" needs an API key` });
    const { default_model: defaultModel, models } = body.config;
    if (defaultModel !== null && models.length && !models.includes(defaultModel)) errors.push({ path: 'body.config.default_model', message: 'not one of models' });
    errors.push(...patternErrors(body.guardrails, 'body.guardrails'));
    if (errors.length) throw problems.invalidFields(errors);
    const { api_key: _key, ...config } = body.config;
    return { name: body.name, provider: body.provider, config, api_key_sealed: sealed, guardrails: body.guardrails, rate_limits: body.rate_limits, log_prompts: body.log_prompts };
  }

  async function callerOf(input: { orgId: number; principal: MeshCaller['principal']; requestId: string }, project: number | undefined): Promise<MeshCaller> {
    if (project !== undefined && !(await projects.exists(input.orgId, project))) throw problems.badRequest(`no project ${project} in this organization`, [{ path: 'body.project_id', message: 'not found' }]);
    return { orgId: input.orgId, principal: input.principal, projectId: project ?? null, requestId: input.requestId };
  }

  return [
    defineRoute({
      ...use,
      method: 'get',
      path: '/providers',
      summary: 'LLM providers offered here',
      description: 'The kinds of model server a connection may use, contributed by plugins to `llm_mesh.providers`.',
      responses: { 200: { description: 'The providers', schema: z.object({ items: z.array(z.object({ id: z.string(), plugin_id: z.string(), description: z.string(), default_base_url: z.string().nullable(), requires_api_key: z.boolean(), embeddings: z.boolean() })) }) } },
      handler: async ({ orgId }) => ({ items: await providers.described(orgId) }),
    }),
    defineRoute({
      ...manage,
      method: 'post',
      path: '/connections',
      summary: 'Add an LLM connection',
      description: 'A model server the organization calls through the mesh, with its guardrails, rate limits and prices. The API key is sealed at rest and never answered; the base URL goes through the outbound guard (a private address only when OUTBOUND_ALLOWED_HOSTS allows it).',
      request: { body: connectionBody },
      responses: { 201: { description: 'The connection', schema: connectionSchema }, 409: { description: 'A connection of that name exists' } },
      handler: async ({ body, orgId, principal, audit }) => {
        const record = await connections.create(orgId, await checked(orgId, body, null, body.config.api_key), principal.userId);
        await audit.record({ security: true, action: 'llm_mesh.connection.create', targetType: 'llm_connection', targetId: record.id, details: { provider: record.provider, name: record.name } });
        return reply(201, answerOf(record));
      },
    }),
    defineRoute({
      ...use,
      method: 'get',
      path: '/connections',
      summary: 'List LLM connections',
      description: 'Never their API keys.',
      responses: { 200: { description: 'The connections', schema: z.object({ items: z.array(connectionSchema) }) } },
      handler: async ({ orgId }) => ({ items: (await connections.list(orgId)).map(answerOf) }),
    }),
    defineRoute({
      ...use,
      method: 'get',
      path: '/connections/{id}',
      summary: 'Get an LLM connection',
      description: 'Its config (the API key shown as ********), guardrails, rate limits and whether it logs prompts.',
      request: { params: idParams },
      responses: { 200: { description: 'The connection', schema: connectionSchema } },
      handler: async ({ params, orgId }) => answerOf(await connections.get(orgId, params.id)),
    }),
    defineRoute({
      ...manage,
      method: 'patch',
      path: '/connections/{id}',
      summary: 'Change an LLM connection',
      description: 'The fields given replace the saved ones (config, guardrails and rate_limits each as a whole); config.api_key omitted keeps the key, null removes it.',
      request: { params: idParams, body: connectionPatch },
      responses: { 200: { description: 'The connection', schema: connectionSchema } },
      handler: async ({ params, body, orgId, audit }) => {
        const current = await connections.get(orgId, params.id);
        const given = Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined));
        const merged = { name: current.name, provider: current.provider, config: current.config, guardrails: current.guardrails, rate_limits: current.rate_limits, log_prompts: current.log_prompts, ...given };
        const record = await connections.update(orgId, params.id, await checked(orgId, merged, current, body.config?.api_key));
        await audit.record({ security: true, action: 'llm_mesh.connection.update', targetType: 'llm_connection', targetId: record.id, details: { changed: Object.keys(body), api_key_changed: body.config?.api_key !== undefined } });
        return answerOf(record);
      },
    }),
    defineRoute({
      ...manage,
      method: 'delete',
      path: '/connections/{id}',
      summary: 'Delete an LLM connection',
      description: 'Its calls stay traced and counted in usage and quotas.',
      request: { params: idParams },
      responses: { 204: { description: 'Deleted' } },
      handler: async ({ params, orgId, audit }) => {
        await connections.remove(orgId, params.id);
        await audit.record({ security: true, action: 'llm_mesh.connection.delete', targetType: 'llm_connection', targetId: params.id });
        return reply(204);
      },
    }),
    defineRoute({
      ...manage,
      method: 'post',
      path: '/connections/{id}/test',
      summary: 'Test an LLM connection',
      description: 'Asks the server for its models: {ok: true, models, latency_ms}, or {ok: false, error} saying what failed (never the key).',
      request: { params: idParams },
      responses: { 200: { description: 'The outcome', schema: z.object({ ok: z.boolean(), models: z.array(z.string()).optional(), latency_ms: z.number().int(), error: z.string().optional() }) } },
      handler: async ({ params, orgId }) => {
        const record = await connections.get(orgId, params.id);
        const provider = await providers.get(orgId, record.provider);
        if (!provider) throw problems.unprocessable(`the provider "${record.provider}" is not offered in this organization`);
        const started = performance.now();
        try {
          const models = await provider.models(mesh.providerConnection(record, provider));
          return { ok: true, models, latency_ms: Math.round(performance.now() - started) };
        } catch (err) {
          const status = (err as { status?: unknown }).status;
          return { ok: false, latency_ms: Math.round(performance.now() - started), error: `${typeof status === 'number' ? `the server answered ${status}: ` : ''}${String((err as Error).message).slice(0, 500)}` };
        }
      },
    }),
    defineRoute({
      ...use,
      method: 'post',
      path: '/completions',
      summary: 'A chat completion through the mesh',
      description:
        'The prompt goes through the connection\u2019s guardrails (a rejection is a 400 naming the kind), its quotas (a blocking quota spent: 429 naming it) and rate limits (429 with Retry-After after a short wait), then to the provider; the answer through the answer guardrails (a rejection: 422). Every call is traced with its cost. With `stream: true` the answer is Server-Sent Events (`delta`, then `done` or `error`); a streamed answer checked by guardrails is released a sentence at a time.',
      request: { body: completionBody },
      responses: {
        200: { description: 'The completion, or its stream', content: { 'application/json': completionSchema, 'text/event-stream': z.string() } },
        422: { description: 'The answer was rejected by a guardrail' },
        429: { description: 'A quota is spent, or a rate limit reached' },
        502: { description: 'The provider failed' },
      },
      handler: async ({ body, orgId, principal, requestId, log }) => {
        const caller = await callerOf({ orgId, principal, requestId }, body.project_id);
        const { stream, project_id: _project, ...request } = body;
        if (!stream) return mesh.complete(caller, request);
        return eventStream(completionEvents(await mesh.stream(caller, request)), { requestId, log, failed: 'the completion failed midway' });
      },
    }),
    defineRoute({
      ...use,
      method: 'post',
      path: '/embeddings',
      summary: 'Embeddings through the mesh',
      description: 'Vectors of the inputs, in order; the inputs go through the prompt guardrails first. Traced and counted like a completion.',
      request: {
        body: z
          .object({ connection_id: s.recordId, model: z.string().min(1).max(200).optional(), input: z.array(z.string().max(1_000_000)).min(1).max(2048), project_id: projectId })
          .strict(),
      },
      responses: { 200: { description: 'The vectors', schema: z.object({ vectors: z.array(z.array(z.number())), usage: z.object({ input_tokens: z.number().int() }), cost_usd: z.number() }) }, 502: { description: 'The provider failed' } },
      handler: async ({ body, orgId, principal, requestId }) => {
        const caller = await callerOf({ orgId, principal, requestId }, body.project_id);
        return mesh.embed(caller, { connection_id: body.connection_id, model: body.model, input: body.input });
      },
    }),
    defineRoute({
      ...manage,
      method: 'post',
      path: '/quotas',
      summary: 'Add a cost quota',
      description: 'Counts the cost of the calls of the organization, a project, a user or a connection over the calendar month or the last `days` days. Blocking: once spent, the calls it counts are answered 429 naming it. Each threshold of `alert_at` crossed notifies the organization\u2019s admins once per period.',
      request: { body: quotaInputSchema },
      responses: { 201: { description: 'The quota', schema: z.record(z.string(), z.unknown()) } },
      handler: async ({ body, orgId, principal, audit }) => {
        const errors: FieldError[] = [];
        if (body.scope === 'organization' && body.scope_id !== null) errors.push({ path: 'body.scope_id', message: 'must be null for the organization scope' });
        if (body.scope !== 'organization' && body.scope_id === null) errors.push({ path: 'body.scope_id', message: `names the ${body.scope}` });
        if (body.scope === 'project' && body.scope_id !== null && !(await projects.exists(orgId, body.scope_id))) errors.push({ path: 'body.scope_id', message: 'no such project in this organization' });
        if (body.scope === 'connection' && body.scope_id !== null) await connections.get(orgId, body.scope_id).catch(() => errors.push({ path: 'body.scope_id', message: 'no such LLM connection in this organization' }));
        if (body.period === 'rolling_days' && body.days === null) errors.push({ path: 'body.days', message: 'required for rolling_days' });
        if (errors.length) throw problems.invalidFields(errors);
        const quota = await quotas.create(orgId, body, principal.userId);
        await audit.record({ action: 'llm_mesh.quota.create', targetType: 'llm_quota', targetId: quota.id, details: { scope: quota.scope, scope_id: quota.scope_id, amount_usd: quota.amount_usd } });
        return reply(201, await quotas.withSpending(orgId, quota));
      },
    }),
    defineRoute({
      ...manage,
      method: 'get',
      path: '/quotas',
      summary: 'List cost quotas',
      description: 'Each with what its current period has spent.',
      responses: { 200: { description: 'The quotas', schema: z.object({ items: z.array(z.record(z.string(), z.unknown())) }) } },
      handler: async ({ orgId }) => ({ items: await Promise.all((await quotas.list(orgId)).map((q) => quotas.withSpending(orgId, q))) }),
    }),
    defineRoute({
      ...manage,
      method: 'delete',
      path: '/quotas/{id}',
      summary: 'Delete a cost quota',
      description: 'The calls it counted stay in the traces and usage; its alerts sent stay sent.',
      request: { params: idParams },
      responses: { 204: { description: 'Deleted' } },
      handler: async ({ params, orgId, audit }) => {
        await quotas.remove(orgId, params.id);
        await audit.record({ action: 'llm_mesh.quota.delete', targetType: 'llm_quota', targetId: params.id });
        return reply(204);
      },
    }),
    defineRoute({
      ...manage,
      method: 'get',
      path: '/usage',
      summary: 'LLM usage',
      description: 'Requests, tokens, cost and errors (calls not `ok`) since `since`, by user, model, connection or project; the most costly first.',
      request: { query: z.object({ since: instant.optional().describe('ISO-8601 instant; default 30 days ago'), group_by: z.enum(Object.keys(USAGE_GROUPS) as [keyof typeof USAGE_GROUPS]).default('model') }) },
      responses: { 200: { description: 'Usage per group', schema: z.object({ since: z.string(), group_by: z.string(), items: z.array(z.record(z.string(), z.unknown())) }) } },
      handler: async ({ query, orgId }) => {
        const since = new Date(query.since ? Date.parse(query.since) : Date.now() - 30 * 86_400_000).toISOString();
        return { since, group_by: query.group_by, items: await calls.usage(orgId, since, query.group_by) };
      },
    }),
    defineRoute({
      ...manage,
      method: 'get',
      path: '/calls',
      summary: 'Traces of LLM calls',
      description: 'Newest first: request id, connection, model, status, latency, tokens, cost and guardrail outcomes; the prompt and answer only when the connection logs prompts.',
      request: { query: z.object({ limit: z.coerce.number().int().min(1).max(200).default(50), cursor: z.string().max(200).optional(), connection_id: s.pathId.optional() }) },
      responses: { 200: { description: 'A page of traces', schema: z.object({ items: z.array(z.record(z.string(), z.unknown())), next_cursor: z.string().nullable() }) } },
      handler: ({ query, orgId }) => calls.list(orgId, query),
    }),
  ];
}

/** A streamed completion's events: its deltas, then `done` with the whole completion. */
async function* completionEvents(chunks: AsyncIterable<MeshChunk>): AsyncGenerator<ServerSentEvent> {
  for await (const chunk of chunks) yield chunk.type === 'delta' ? { event: 'delta', data: { text: chunk.text } } : { event: 'done', data: chunk.completion };
}
