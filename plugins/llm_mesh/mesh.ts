import { performance } from 'node:perf_hooks';
import { actingUserId, HttpProblem, OutboundFailedError, OutboundRefusedError, problems, type kernelServices, type ServiceType } from '../../kernel/plugin-api.ts';
import type { CallLog, CallTrace } from './call-log.ts';
import type { ConnectionRecord, ConnectionStore } from './connection-store.ts';
import { guardrailChecker, merged, type GuardrailChecker } from './guardrails.ts';
import type { Providers } from './providers.ts';
import type {
  ChatMessage,
  Completion,
  CompletionChunk,
  EmbeddingRequest,
  Embeddings,
  GuardrailOutcome,
  LlmMesh,
  LlmProviderContribution,
  MeshCaller,
  MeshChunk,
  MeshCompletion,
  MeshCompletionRequest,
  ProviderConnection,
  TokenUsage,
  ToolCall,
} from './public.ts';
import type { Quota, Quotas } from './quotas.ts';
import { SentenceRelease } from './sentence-release.ts';

export interface MeshDeps {
  connections: ConnectionStore;
  providers: Providers;
  calls: CallLog;
  quotas: Quotas;
  vault: ServiceType<typeof kernelServices.vault>;
  outbound: ServiceType<typeof kernelServices.outbound>;
  rateLimits: ServiceType<typeof kernelServices.rateLimits>;
  audit: ServiceType<typeof kernelServices.audit>;
  /** The platform's keyed HMAC: what `hash` guardrails replace a value with. */
  hmac: (text: string) => string;
  idleTimeoutMs: number;
  rateLimitWaitMs: number;
}

/** The largest answer a provider may send (a batch of embeddings is the large one). */
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;
const MINUTE_MS = 60_000;

/** Everything decided before a call reaches its provider: one call's setting. */
interface Prepared {
  record: ConnectionRecord;
  provider: LlmProviderContribution;
  connection: ProviderConnection;
  model: string;
  checker: GuardrailChecker;
  started: number;
  /** The quotas counting the call (their alerts are checked once it cost something). */
  quotas: Quota[];
}

const costOf = (record: ConnectionRecord, model: string, usage: TokenUsage) => {
  const price = record.config.prices[model];
  return price ? (usage.input_tokens * price.input_per_million + usage.output_tokens * price.output_per_million) / 1_000_000 : 0;
};

/** Roughly four characters a token (OpenAI's rule of thumb): what a rate limit in tokens counts before the call. */
const estimatedTokens = (chars: number) => Math.ceil(chars / 4);
/** What a completion spends of a tokens-per-minute limit before it is made: its prompt's estimate plus max_tokens, as OpenAI's own limiter counts. */
const completionTokens = (messages: ChatMessage[], maxTokens: number | undefined) => estimatedTokens(messages.reduce((n, m) => n + (m.content?.length ?? 0), 0)) + (maxTokens ?? 0);

/** A provider's failure as the caller's answer: the peer's status and message, never the request (which holds the key). */
function providerProblem(record: ConnectionRecord, err: unknown): HttpProblem {
  if (err instanceof HttpProblem) return err;
  if (err instanceof OutboundRefusedError) return problems.unprocessable(`LLM connection ${record.id} cannot be called: ${err.message}`, [{ path: 'config.base_url', message: err.message }]);
  const status = (err as { status?: unknown }).status;
  const message = String((err as Error)?.message ?? err).slice(0, 500);
  if (typeof status === 'number') return new HttpProblem(502, `the provider of LLM connection ${record.id} answered ${status}: ${message}`);
  if (err instanceof OutboundFailedError) return new HttpProblem(502, `the provider of LLM connection ${record.id} failed: ${message}`);
  return new HttpProblem(502, `the provider of LLM connection ${record.id} could not be reached: ${message}`);
}

const promptText = (messages: ChatMessage[]) => messages.map((m) => `${m.role}: ${m.content ?? ''}`).join('\n');

/**
 * The mesh: each call goes through its connection's guardrails, its quotas and rate limits, then
 * its provider, and is traced (with its cost) whatever the outcome; guardrail decisions are audited.
 */
export class Mesh implements LlmMesh {
  private readonly checkers = new Map<number, { updatedAt: string; checker: GuardrailChecker }>();

  constructor(private readonly deps: MeshDeps) {}

  async complete(caller: MeshCaller, request: MeshCompletionRequest): Promise<MeshCompletion> {
    const prepared = await this.prepare(caller, request.connection_id, request.model, 'completion');
    const { messages, outcomes } = await this.checkPrompt(caller, prepared, request.messages, false);
    await this.withinLimits(caller, prepared, 'completion', false, completionTokens(messages, request.max_tokens));
    const prompt = promptText(messages);
    let completion: Completion;
    try {
      completion = await prepared.provider.complete(prepared.connection, { ...request, model: prepared.model, messages });
    } catch (err) {
      throw await this.failed(caller, prepared, 'completion', false, err, outcomes, prompt);
    }
    const answer = this.checkAnswer(prepared, completion.message.content ?? '');
    const tools = this.checkToolCalls(prepared, completion);
    const checked = [...outcomes, ...answer.outcomes, ...tools.outcomes];
    const problem = answer.problem ?? tools.problem;
    if (problem) throw await this.rejectedAnswer(caller, prepared, completion, false, checked, prompt, problem);
    const message = { ...completion.message, content: completion.message.content === null ? null : answer.text, ...(tools.calls ? { tool_calls: tools.calls } : {}) };
    return this.finish(caller, prepared, { ...completion, message }, false, checked, prompt);
  }

  async stream(caller: MeshCaller, request: MeshCompletionRequest): Promise<AsyncIterable<MeshChunk>> {
    const prepared = await this.prepare(caller, request.connection_id, request.model, 'completion');
    const { messages, outcomes } = await this.checkPrompt(caller, prepared, request.messages, true);
    await this.withinLimits(caller, prepared, 'completion', true, completionTokens(messages, request.max_tokens));
    const chunks = prepared.provider.stream(prepared.connection, { ...request, model: prepared.model, messages });
    return this.checkedStream(caller, prepared, chunks, outcomes, promptText(messages));
  }

  private async *checkedStream(caller: MeshCaller, prepared: Prepared, chunks: AsyncIterable<CompletionChunk>, promptOutcomes: GuardrailOutcome[], prompt: string): AsyncGenerator<MeshChunk> {
    const release = prepared.checker.checksAnswers ? new SentenceRelease() : null;
    const answerOutcomes: GuardrailOutcome[] = [];
    let passed = '';
    // A piece of the answer through the answer guardrails; a rejection ends the stream with a problem.
    const checked = (text: string) => {
      const answer = this.checkAnswer(prepared, text);
      answerOutcomes.push(...answer.outcomes);
      return answer;
    };
    // Set once the stream ended one way or the other; a stream its client stopped reading is traced in `finally`.
    let settled = false;
    try {
      for await (const chunk of chunks) {
        if (chunk.type === 'delta') {
          const text = release ? release.push(chunk.text) : chunk.text;
          if (!text) continue;
          const answer = checked(text);
          if (answer.problem) throw await this.rejectedAnswer(caller, prepared, null, true, [...promptOutcomes, ...answerOutcomes], prompt, answer.problem);
          passed += answer.text;
          yield { type: 'delta', text: answer.text };
        } else if (chunk.type === 'done') {
          const completion = chunk.completion;
          const rest = release?.flush() ?? '';
          if (rest) {
            const answer = checked(rest);
            if (answer.problem) throw await this.rejectedAnswer(caller, prepared, completion, true, [...promptOutcomes, ...answerOutcomes], prompt, answer.problem);
            passed += answer.text;
            yield { type: 'delta', text: answer.text };
          }
          const tools = this.checkToolCalls(prepared, completion);
          answerOutcomes.push(...tools.outcomes);
          if (tools.problem) throw await this.rejectedAnswer(caller, prepared, completion, true, [...promptOutcomes, ...answerOutcomes], prompt, tools.problem);
          const message = { ...completion.message, content: completion.message.content === null ? null : passed, ...(tools.calls ? { tool_calls: tools.calls } : {}) };
          const finished = await this.finish(caller, prepared, { ...completion, message }, true, [...promptOutcomes, ...answerOutcomes], prompt);
          settled = true;
          yield { type: 'done', completion: finished };
        }
      }
    } catch (err) {
      settled = true;
      if (err instanceof HttpProblem && err.status === 422) throw err;
      throw await this.failed(caller, prepared, 'completion', true, err, [...promptOutcomes, ...answerOutcomes], prompt);
    } finally {
      // Leaving the loop early ended the provider's stream (its request aborted) too.
      if (!settled) await this.trace(caller, prepared, { operation: 'completion', streamed: true, status: 'error', error: 'the client stopped reading the stream', usage: { input_tokens: 0, output_tokens: 0 }, costUsd: 0, guardrails: merged([...promptOutcomes, ...answerOutcomes]), prompt, answer: null });
    }
  }

  async embed(caller: MeshCaller, request: Omit<EmbeddingRequest, 'model'> & { connection_id: number; model?: string }): Promise<Embeddings & { cost_usd: number }> {
    const prepared = await this.prepare(caller, request.connection_id, request.model, 'embedding');
    if (!prepared.provider.embed) throw problems.badRequest(`the provider "${prepared.provider.id}" has no embeddings`, [{ path: 'body.connection_id', message: 'no embeddings' }]);
    const { texts, outcomes } = prepared.checker.inputs(request.input);
    await this.audit(caller, prepared.record, outcomes);
    await this.withinLimits(caller, prepared, 'embedding', false, estimatedTokens(texts.reduce((n, t) => n + t.length, 0)));
    let embeddings: Embeddings;
    try {
      embeddings = await prepared.provider.embed(prepared.connection, { model: prepared.model, input: texts, signal: request.signal });
    } catch (err) {
      throw await this.failed(caller, prepared, 'embedding', false, err, outcomes, texts.join('\n'));
    }
    if (embeddings.vectors.length !== texts.length) throw await this.failed(caller, prepared, 'embedding', false, new Error(`answered ${embeddings.vectors.length} vectors for ${texts.length} inputs`), outcomes, null);
    const usage = { input_tokens: embeddings.usage.input_tokens, output_tokens: 0 };
    const cost = costOf(prepared.record, prepared.model, usage);
    await this.trace(caller, prepared, { operation: 'embedding', streamed: false, status: 'ok', error: null, usage, costUsd: cost, guardrails: outcomes, prompt: texts.join('\n'), answer: null });
    return { ...embeddings, cost_usd: cost };
  }

  async connection(orgId: number, id: number) {
    const record = await this.deps.connections.find(orgId, id);
    return record && { id: record.id, name: record.name, provider: record.provider, models: record.config.models, default_model: record.config.default_model };
  }

  /** The connection, its provider as offered in the organization, the model, the quotas: all checked before anything is sent. */
  private async prepare(caller: MeshCaller, connectionId: number, requested: string | undefined, operation: CallTrace['operation']): Promise<Prepared> {
    const record = await this.deps.connections.get(caller.orgId, connectionId);
    const provider = await this.deps.providers.get(caller.orgId, record.provider);
    if (!provider) throw problems.unprocessable(`LLM connection ${record.id} uses the provider "${record.provider}", which is not offered in this organization`);
    const model = requested ?? record.config.default_model;
    if (!model) throw problems.badRequest('name a model: the connection has no default_model', [{ path: 'body.model', message: 'required' }]);
    if (record.config.models.length && !record.config.models.includes(model)) {
      throw problems.badRequest(`the model "${model}" is not one this connection offers (${record.config.models.join(', ')})`, [{ path: 'body.model', message: 'not offered by the connection' }]);
    }
    const started = performance.now();
    const prepared: Prepared = { record, provider, connection: this.providerConnection(record, provider), model, checker: this.checkerOf(record), started, quotas: [] };
    try {
      prepared.quotas = await this.deps.quotas.check(this.scopeOf(caller, record));
    } catch (err) {
      await this.trace(caller, prepared, { operation, streamed: false, status: 'rejected', error: (err as Error).message, usage: { input_tokens: 0, output_tokens: 0 }, costUsd: 0, guardrails: [], prompt: null, answer: null });
      throw err;
    }
    return prepared;
  }

  /** The connection as its provider is given it: the key opened, the outbound guard's fetch. */
  providerConnection(record: ConnectionRecord, provider: LlmProviderContribution): ProviderConnection {
    return {
      base_url: record.config.base_url ?? provider.default_base_url,
      api_key: record.api_key_sealed === null ? null : this.deps.vault.open(record.api_key_sealed),
      options: record.config.options,
      fetch: this.deps.outbound.fetchWith({ maxBodyBytes: MAX_ANSWER_BYTES, idleMs: this.deps.idleTimeoutMs }),
      timeoutMs: this.deps.idleTimeoutMs,
    };
  }

  private checkerOf(record: ConnectionRecord): GuardrailChecker {
    const known = this.checkers.get(record.id);
    if (known && known.updatedAt === record.updated_at) return known.checker;
    const checker = guardrailChecker(record.guardrails, this.deps.hmac);
    this.checkers.set(record.id, { updatedAt: record.updated_at, checker });
    return checker;
  }

  private scopeOf(caller: MeshCaller, record: ConnectionRecord) {
    return { orgId: caller.orgId, projectId: caller.projectId ?? null, userId: actingUserId(caller.principal), connectionId: record.id };
  }

  /** The prompt through the guardrails; a rejection is traced, audited and answered 400. */
  private async checkPrompt(caller: MeshCaller, prepared: Prepared, messages: ChatMessage[], streamed: boolean) {
    try {
      const checked = prepared.checker.prompt(messages);
      await this.audit(caller, prepared.record, checked.outcomes);
      return checked;
    } catch (err) {
      if (err instanceof HttpProblem) {
        const outcome = rejectionOutcome(err);
        await this.audit(caller, prepared.record, outcome);
        await this.trace(caller, prepared, { operation: 'completion', streamed, status: 'rejected', error: err.detail, usage: { input_tokens: 0, output_tokens: 0 }, costUsd: 0, guardrails: outcome, prompt: null, answer: null });
      }
      throw err;
    }
  }

  /** The completion's tool calls through the answer guardrails (none checked when it has none, or nothing is checked in answers). */
  private checkToolCalls(prepared: Prepared, completion: Completion): { calls?: ToolCall[]; outcomes: GuardrailOutcome[]; problem?: HttpProblem } {
    const calls = completion.message.tool_calls;
    if (!calls?.length || !prepared.checker.checksAnswers) return { outcomes: [] };
    try {
      return prepared.checker.toolCalls(calls);
    } catch (err) {
      if (!(err instanceof HttpProblem)) throw err;
      return { outcomes: rejectionOutcome(err, 'answer'), problem: err };
    }
  }

  private checkAnswer(prepared: Prepared, text: string): { text: string; outcomes: GuardrailOutcome[]; problem?: HttpProblem } {
    try {
      return prepared.checker.answer(text);
    } catch (err) {
      if (!(err instanceof HttpProblem)) throw err;
      return { text: '', outcomes: rejectionOutcome(err, 'answer'), problem: err };
    }
  }

  /** The rate limits of the call (below); a call they refuse is traced as rejected. */
  private async withinLimits(caller: MeshCaller, prepared: Prepared, operation: CallTrace['operation'], streamed: boolean, tokens: number): Promise<void> {
    try {
      await this.limit(prepared, tokens);
    } catch (err) {
      await this.trace(caller, prepared, { operation, streamed, status: 'rejected', error: (err as Error).message, usage: { input_tokens: 0, output_tokens: 0 }, costUsd: 0, guardrails: [], prompt: null, answer: null });
      throw err;
    }
  }

  /**
   * Spends the connection's (and its model's) requests and tokens per minute; over a limit the
   * call waits up to LLM_RATE_LIMIT_WAIT_MS for room, then is answered 429 with Retry-After.
   */
  private async limit(prepared: Prepared, tokens: number): Promise<void> {
    const { record, model } = prepared;
    const modelLimits = record.rate_limits.per_model[model];
    const budgets = [
      { key: `llm:${record.id}`, limits: record.rate_limits, what: `LLM connection ${record.id}` },
      ...(modelLimits ? [{ key: `llm:${record.id}:${model}`, limits: modelLimits, what: `the model ${model} on LLM connection ${record.id}` }] : []),
    ].flatMap(({ key, limits, what }) => [
      ...(limits.requests_per_minute ? [{ key: `${key}:requests`, budget: { name: 'llm', limit: limits.requests_per_minute, windowMs: MINUTE_MS, detail: `${what} allows ${limits.requests_per_minute} requests a minute; retry later` } }] : []),
      // A call larger than the whole budget waits for a full bucket rather than never going.
      ...(limits.tokens_per_minute ? [{ key: `${key}:tokens`, budget: { name: 'llm', limit: limits.tokens_per_minute, windowMs: MINUTE_MS, cost: Math.min(tokens, limits.tokens_per_minute), detail: `${what} allows ${limits.tokens_per_minute} tokens a minute; retry later` } }] : []),
    ]);
    for (const { key, budget } of budgets) {
      const deadline = performance.now() + this.deps.rateLimitWaitMs;
      for (;;) {
        const decision = await this.deps.rateLimits.decide(key, budget);
        if (decision.allowed) break;
        const wait = decision.retryAfterMs;
        if (performance.now() + wait > deadline) throw problems.tooManyRequests(budget.detail, Math.max(1, Math.ceil(wait / 1000)));
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  private async finish(caller: MeshCaller, prepared: Prepared, completion: Completion, streamed: boolean, outcomes: GuardrailOutcome[], prompt: string): Promise<MeshCompletion> {
    const guardrails = merged(outcomes);
    const cost = costOf(prepared.record, completion.model || prepared.model, completion.usage);
    await this.audit(caller, prepared.record, guardrails.filter((o) => o.stage === 'answer'));
    const id = await this.trace(caller, prepared, { operation: 'completion', streamed, status: 'ok', error: null, usage: completion.usage, costUsd: cost, guardrails, prompt, answer: completion.message.content });
    return { id: `llmcall_${id}`, ...completion, cost_usd: cost, guardrails };
  }

  /** The provider failed: traced as an error and answered 502 (or the problem it already is). */
  private async failed(caller: MeshCaller, prepared: Prepared, operation: CallTrace['operation'], streamed: boolean, err: unknown, outcomes: GuardrailOutcome[], prompt: string | null): Promise<HttpProblem> {
    const problem = providerProblem(prepared.record, err);
    await this.trace(caller, prepared, { operation, streamed, status: 'error', error: problem.detail, usage: { input_tokens: 0, output_tokens: 0 }, costUsd: 0, guardrails: merged(outcomes), prompt, answer: null });
    return problem;
  }

  /** An answer the guardrails reject: its cost is still counted (the model was called), its text is not kept. */
  private async rejectedAnswer(caller: MeshCaller, prepared: Prepared, completion: Completion | null, streamed: boolean, outcomes: GuardrailOutcome[], prompt: string, problem: HttpProblem): Promise<HttpProblem> {
    const usage = completion?.usage ?? { input_tokens: 0, output_tokens: 0 };
    const guardrails = merged(outcomes);
    await this.audit(caller, prepared.record, guardrails.filter((o) => o.stage === 'answer'));
    await this.trace(caller, prepared, { operation: 'completion', streamed, status: 'rejected', error: problem.detail, usage, costUsd: costOf(prepared.record, prepared.model, usage), guardrails, prompt, answer: null });
    return problem;
  }

  private async trace(caller: MeshCaller, prepared: Prepared, call: Pick<CallTrace, 'operation' | 'streamed' | 'status' | 'error' | 'usage' | 'costUsd' | 'guardrails' | 'prompt' | 'answer'>): Promise<number> {
    const logged = prepared.record.log_prompts;
    const id = await this.deps.calls.record({
      ...call,
      orgId: caller.orgId,
      connectionId: prepared.record.id,
      userId: actingUserId(caller.principal),
      projectId: caller.projectId ?? null,
      requestId: caller.requestId ?? null,
      model: prepared.model,
      latencyMs: performance.now() - prepared.started,
      prompt: logged ? call.prompt : null,
      answer: logged ? call.answer : null,
    });
    if (call.costUsd > 0 && prepared.quotas.length) await this.deps.quotas.alert(this.scopeOf(caller, prepared.record), prepared.quotas);
    return id;
  }

  /** Each guardrail decision in the audit log: what, where and how often, never the text. */
  private async audit(caller: MeshCaller, record: ConnectionRecord, outcomes: GuardrailOutcome[]): Promise<void> {
    for (const outcome of outcomes) {
      await this.deps.audit.record(
        { action: 'llm_mesh.guardrail', outcome: outcome.action === 'reject' ? 'failure' : 'success', targetType: 'llm_connection', targetId: record.id, details: { ...outcome } },
        { requestId: caller.requestId, principal: caller.principal, orgId: caller.orgId },
      );
    }
  }
}

/** The outcome a guardrail's rejection stands for (its field error names it). */
function rejectionOutcome(problem: HttpProblem, stage: 'prompt' | 'answer' = 'prompt'): GuardrailOutcome[] {
  const named = problem.options.errors?.[0]?.message ?? '';
  const [guardrail, kind] = named.split(': ');
  if (guardrail === 'pii' || guardrail === 'custom_pattern' || guardrail === 'forbidden_terms') return [{ guardrail, stage, kind, action: 'reject', count: 1 }];
  if (guardrail === 'prompt_injection') return [{ guardrail, stage, kind: 'injection', action: 'reject', count: 1 }];
  if (guardrail === 'max_prompt_size') return [{ guardrail, stage, kind: 'size', action: 'reject', count: 1 }];
  return [];
}
