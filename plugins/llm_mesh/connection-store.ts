import { ChangeCountedCache, problems, z } from '../../kernel/plugin-api.ts';
import { LLM_MESH_COUNTER } from './migrations.ts';
import type { Storage } from '../../storage/index.ts';
import { guardrailsSchema, type Guardrails } from './guardrails.ts';

const modelName = z.string().min(1).max(200);
const price = z.number().min(0).max(1_000_000);

export const connectionConfigSchema = z
  .object({
    base_url: z.string().max(2000).nullable().default(null).describe('The server\u2019s API root (e.g. http://localhost:11434/v1 for Ollama); null: the provider\u2019s own'),
    api_key: z.string().min(1).max(4000).nullable().optional().describe('Sealed at rest, never answered (shown as ********); omitted in a PATCH: kept'),
    models: z.array(modelName).max(200).default([]).describe('The models callers may name; empty: any the server offers'),
    default_model: modelName.nullable().default(null).describe('Used when a call names no model'),
    prices: z
      .record(modelName, z.object({ input_per_million: price, output_per_million: price }).strict())
      .default({})
      .describe('USD per million input and output tokens, per model: what cost_usd and quotas count (a model without a price costs 0)'),
    options: z.record(z.string().max(100), z.union([z.string().max(2000), z.number(), z.boolean()])).default({}).describe(
        'Provider settings; openai_compatible reads max_completion_tokens: true (the limit sent as max_completion_tokens, as OpenAI\u2019s newer models want it) and api_version (Azure OpenAI: base_url https://{resource}.openai.azure.com/openai, models named by their deployment)',
      ),
  })
  .strict();
export type ConnectionConfig = z.output<typeof connectionConfigSchema>;

const perMinute = z.number().int().min(1).max(100_000_000).nullable().default(null);
const limitPair = z.object({ requests_per_minute: perMinute, tokens_per_minute: perMinute }).strict();
export const rateLimitsSchema = limitPair
  .extend({ per_model: z.record(modelName, limitPair).default({}).describe('Limits of one model, over the connection\u2019s') })
  .strict()
  .meta({ id: 'LlmRateLimits', description: 'Requests and tokens per minute (tokens counted as OpenAI\u2019s limiter counts them: the prompt\u2019s estimate plus max_tokens)' });
export type RateLimitSettings = z.output<typeof rateLimitsSchema>;

/** What is saved of a connection (the API key sealed). */
export interface ConnectionWrite {
  name: string;
  provider: string;
  config: Omit<ConnectionConfig, 'api_key'>;
  api_key_sealed: string | null;
  guardrails: Guardrails;
  rate_limits: RateLimitSettings;
  log_prompts: boolean;
}

/** A connection as the mesh uses it: the API key still sealed. */
export interface ConnectionRecord extends ConnectionWrite {
  id: number;
  org_id: number;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

/** A connection as answered: the key masked. */
export function answerOf(record: ConnectionRecord) {
  const { api_key_sealed, org_id: _org, ...rest } = record;
  return { ...rest, config: { ...record.config, api_key: api_key_sealed === null ? null : '********' } };
}

interface Row {
  id: number;
  org_id: number;
  name: string;
  provider: string;
  config: string;
  api_key_sealed: string | null;
  guardrails: string;
  rate_limits: string;
  log_prompts: number | boolean;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

const recordOf = (row: Row): ConnectionRecord => ({
  ...row,
  config: JSON.parse(row.config),
  guardrails: JSON.parse(row.guardrails),
  rate_limits: JSON.parse(row.rate_limits),
  log_prompts: Boolean(Number(row.log_prompts)),
});

const notFound = (id: number) => problems.notFound(`no LLM connection ${id} in this organization`);

/** The organization's LLM connections: every read and write is filtered by its id. */
export class ConnectionStore {
  /** Connections as calls read them (`orgId:id`), until a change of any: no database read per call for them. */
  private readonly known: ChangeCountedCache<string, ConnectionRecord | null>;

  constructor(private readonly storage: Storage) {
    this.known = new ChangeCountedCache(storage, LLM_MESH_COUNTER);
  }

  async create(orgId: number, input: ConnectionWrite, userId: number | null): Promise<ConnectionRecord> {
    const now = this.storage.now();
    await this.nameFree(orgId, input.name);
    const row = await this.storage.db
      .insertInto('llm_mesh_connections')
      .values({ org_id: orgId, ...this.columns(input), created_by: userId, created_at: now, updated_at: now })
      .returningAll()
      .executeTakeFirstOrThrow();
    return recordOf(row as Row);
  }

  async list(orgId: number): Promise<ConnectionRecord[]> {
    return ((await this.storage.db.selectFrom('llm_mesh_connections').selectAll().where('org_id', '=', orgId).orderBy('id').execute()) as Row[]).map(recordOf);
  }

  async get(orgId: number, id: number): Promise<ConnectionRecord> {
    const record = await this.find(orgId, id);
    if (!record) throw notFound(id);
    return record;
  }

  async find(orgId: number, id: number): Promise<ConnectionRecord | null> {
    return this.known.get(`${orgId}:${id}`, async () => {
      const row = (await this.storage.db.selectFrom('llm_mesh_connections').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()) as Row | undefined;
      return row ? recordOf(row) : null;
    });
  }

  async update(orgId: number, id: number, input: ConnectionWrite): Promise<ConnectionRecord> {
    const current = await this.get(orgId, id);
    if (input.name !== current.name) await this.nameFree(orgId, input.name);
    await this.storage.db
      .updateTable('llm_mesh_connections')
      .set({ ...this.columns(input), updated_at: this.storage.now() })
      .where('org_id', '=', orgId)
      .where('id', '=', id)
      .execute();
    return this.get(orgId, id);
  }

  async remove(orgId: number, id: number): Promise<void> {
    const deleted = await this.storage.db.deleteFrom('llm_mesh_connections').where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (Number(deleted.numDeletedRows) === 0) throw notFound(id);
  }

  private columns(input: ConnectionWrite) {
    return {
      name: input.name,
      provider: input.provider,
      config: JSON.stringify(input.config),
      api_key_sealed: input.api_key_sealed,
      guardrails: JSON.stringify(input.guardrails),
      rate_limits: JSON.stringify(input.rate_limits),
      log_prompts: input.log_prompts ? 1 : 0,
    };
  }

  private async nameFree(orgId: number, name: string) {
    const taken = await this.storage.db.selectFrom('llm_mesh_connections').select('id').where('org_id', '=', orgId).where('name', '=', name).executeTakeFirst();
    if (taken) throw problems.conflict(`an LLM connection named "${name}" exists in this organization`);
  }
}
