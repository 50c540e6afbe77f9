/**
 * The LLM mesh's public contract: the extension point model providers are contributed to (what a
 * provider is given and answers), and the mesh as a service other plugins call models through
 * (chat, knowledge bases, AI recipes) with the same guardrails, quotas, limits and tracing as the API.
 */
import { defineExtensionPoint, pluginServiceRef, z, type Principal } from '../../kernel/plugin-api.ts';

/** A message of a conversation, in the mesh's own shape (each provider maps it to its wire format). */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  /** Text; null for an assistant turn that only calls tools. */
  content: string | null;
  /** The tools an assistant turn asked for. */
  tool_calls?: ToolCall[];
  /** On a `tool` message: the call it answers. */
  tool_call_id?: string;
}

/** A tool the model may call: its name, what it does, and the JSON Schema of its arguments. */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as the model wrote them: JSON text (which may not parse). */
  arguments: string;
}

export interface TokenUsage {
  input_tokens: number;
  output_tokens: number;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'error';

/** A model's answer to one completion call. */
export interface Completion {
  model: string;
  message: { role: 'assistant'; content: string | null; tool_calls?: ToolCall[] };
  finish_reason: FinishReason;
  usage: TokenUsage;
}

/** What a provider streams: text as it comes, then the whole completion once. */
export type CompletionChunk = { type: 'delta'; text: string } | { type: 'done'; completion: Completion };

/** A connection as a provider sees it: where, with which secret, and the fetch to call through (the platform's outbound guard). */
export interface ProviderConnection {
  base_url: string | null;
  /** The API key opened from the vault; null when the server needs none (a local Ollama). */
  api_key: string | null;
  /** Provider-specific settings (e.g. Azure's api_version), as saved on the connection. */
  options: Record<string, unknown>;
  fetch: typeof fetch;
  timeoutMs: number;
}

export interface CompletionRequest {
  model: string;
  messages: ChatMessage[];
  temperature?: number;
  max_tokens?: number;
  tools?: ToolDefinition[];
  signal?: AbortSignal;
}

export interface EmbeddingRequest {
  model: string;
  input: string[];
  signal?: AbortSignal;
}

export interface Embeddings {
  vectors: number[][];
  usage: { input_tokens: number };
}

/** A kind of model server, contributed to `llm_mesh.providers` from code. */
export interface LlmProviderContribution {
  /** Unique across plugins (a connection's `provider`). */
  id: string;
  description: string;
  /** Used when a connection names no base_url; null: a connection must name one. */
  default_base_url: string | null;
  /** Whether calls need an API key (a connection without one is refused when saved). */
  requires_api_key: boolean;
  /** One completion, whole. */
  complete(connection: ProviderConnection, request: CompletionRequest): Promise<Completion>;
  /** One completion as it is written: deltas, then the whole completion last. */
  stream(connection: ProviderConnection, request: CompletionRequest): AsyncIterable<CompletionChunk>;
  /** Vectors of texts, in input order; absent when the provider has no embeddings API. */
  embed?(connection: ProviderConnection, request: EmbeddingRequest): Promise<Embeddings>;
  /** The models the server offers (a connection's test). */
  models(connection: ProviderConnection): Promise<string[]>;
}

const fn = <T>() => z.custom<T>((value) => typeof value === 'function', 'must be a function');

/** Checked by the kernel: a lower-case id and the calls a provider answers. */
export const llmProviders = defineExtensionPoint<LlmProviderContribution>({
  id: 'llm_mesh.providers',
  key: (provider) => provider.id,
  schema: z
    .object({
      id: z.string().regex(/^[a-z][a-z0-9_]{0,62}$/, 'must be a lower-case identifier such as openai_compatible'),
      description: z.string(),
      default_base_url: z.string().url().nullable(),
      requires_api_key: z.boolean(),
      complete: fn<LlmProviderContribution['complete']>(),
      stream: fn<LlmProviderContribution['stream']>(),
      embed: fn<NonNullable<LlmProviderContribution['embed']>>().optional(),
      models: fn<LlmProviderContribution['models']>(),
    })
    .strict(),
});

/** Who a call of the mesh is for and what it is counted under (quotas, usage). */
export interface MeshCaller {
  orgId: number;
  principal: Principal;
  /** The project the call is for, when there is one (project quotas, usage by project). */
  projectId?: number | null;
  requestId?: string;
}

/** A guardrail's decision on one call, as answered and audited: never the text it matched. */
export interface GuardrailOutcome {
  guardrail: 'pii' | 'custom_pattern' | 'forbidden_terms' | 'prompt_injection' | 'max_prompt_size';
  stage: 'prompt' | 'answer';
  /** What it found: a PII kind (`email`, `payment_card`…), a custom pattern's name, `term`, `injection`. */
  kind: string;
  action: 'reject' | 'redact' | 'hash' | 'allow' | 'flag';
  count: number;
}

export interface MeshCompletion extends Completion {
  id: string;
  cost_usd: number;
  guardrails: GuardrailOutcome[];
}

/** A completion asked of the mesh: on a connection, its default model unless one is named. */
export interface MeshCompletionRequest extends Omit<CompletionRequest, 'model'> {
  connection_id: number;
  model?: string;
}

/** A stream of a completion through the mesh: deltas of the checked answer, then the whole. */
export type MeshChunk = { type: 'delta'; text: string } | { type: 'done'; completion: MeshCompletion };

/** The LLM mesh as a service: every call checked, limited, counted and traced as the API's are. */
export interface LlmMesh {
  complete(caller: MeshCaller, request: MeshCompletionRequest): Promise<MeshCompletion>;
  stream(caller: MeshCaller, request: MeshCompletionRequest): Promise<AsyncIterable<MeshChunk>>;
  embed(caller: MeshCaller, request: Omit<EmbeddingRequest, 'model'> & { connection_id: number; model?: string }): Promise<Embeddings & { cost_usd: number }>;
  /** The organization's connection (to check a reference to it), or null: never its key. */
  connection(orgId: number, id: number): Promise<{ id: number; name: string; provider: string; models: string[]; default_model: string | null } | null>;
}

export const llmMesh = pluginServiceRef<LlmMesh>('llm_mesh.mesh');

/**
 * The durable event of a cost quota crossing one of its alert thresholds, published once per quota,
 * period and threshold (`notifications` tells the organization's admins).
 */
export const QUOTA_ALERT_EVENT = 'llm_mesh.quota.alert';
export interface QuotaAlertEvent {
  quota_id: number;
  scope: 'organization' | 'project' | 'user' | 'connection';
  scope_id: number | null;
  amount_usd: number;
  spent_usd: number;
  threshold: number;
  period_start: string;
}
