import { sql, type Kysely } from 'kysely';
import { beforeIdCursor } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { GuardrailOutcome, TokenUsage } from './public.ts';

/** One model call as traced: who, what, how long, how much, what the guardrails did; the texts only when the connection logs prompts. */
export interface CallTrace {
  orgId: number;
  connectionId: number;
  userId: number | null;
  projectId: number | null;
  requestId: string | null;
  operation: 'completion' | 'embedding';
  model: string;
  streamed: boolean;
  /** ok; rejected: refused before or after the model by a guardrail, a quota or a limit; error: the provider failed. */
  status: 'ok' | 'rejected' | 'error';
  error: string | null;
  latencyMs: number;
  usage: TokenUsage;
  costUsd: number;
  guardrails: GuardrailOutcome[];
  prompt: string | null;
  answer: string | null;
}

export const USAGE_GROUPS = { user: 'user_id', model: 'model', connection: 'connection_id', project: 'project_id' } as const;
export type UsageGroup = keyof typeof USAGE_GROUPS;

/** Which calls a quota counts: all of an organization's, or those of one project, user or connection. */
export interface SpendScope {
  column: 'project_id' | 'user_id' | 'connection_id' | null;
  id: number | null;
}

/** The trace of every model call (the table `llm_calls`), and the sums read from it. */
export class CallLog {
  constructor(private readonly storage: Storage) {}

  /**
   * Keeps a trace. Its commit does not wait for the database's disk flush (as the rate limits'
   * counters): a crash of the database server itself may lose the last moments of traces, which
   * only leaves a quota a little more room; a crash of the platform loses nothing committed.
   */
  async record(trace: CallTrace): Promise<number> {
    return this.storage.transaction(async (trx) => {
      await this.storage.commitLazily(trx);
      return this.insert(trx, trace);
    });
  }

  private async insert(db: Kysely<any>, trace: CallTrace): Promise<number> {
    const row = await db
      .insertInto('llm_mesh_calls')
      .values({
        org_id: trace.orgId,
        connection_id: trace.connectionId,
        user_id: trace.userId,
        project_id: trace.projectId,
        request_id: trace.requestId,
        operation: trace.operation,
        model: trace.model,
        streamed: trace.streamed ? 1 : 0,
        status: trace.status,
        error: trace.error,
        latency_ms: Math.round(trace.latencyMs),
        input_tokens: trace.usage.input_tokens,
        output_tokens: trace.usage.output_tokens,
        cost_usd: trace.costUsd,
        guardrails: JSON.stringify(trace.guardrails),
        prompt: trace.prompt,
        answer: trace.answer,
        created_at: this.storage.now(),
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return Number(row.id);
  }

  /** The organization's calls, newest first, a page at a time. */
  async list(orgId: number, query: { limit: number; cursor?: string; connection_id?: number }) {
    let select = this.storage.db.selectFrom('llm_mesh_calls').selectAll().where('org_id', '=', orgId);
    if (query.connection_id !== undefined) select = select.where('connection_id', '=', query.connection_id);
    if (query.cursor !== undefined) select = select.where('id', '<', beforeIdCursor.decode(query.cursor));
    const rows = await select.orderBy('id', 'desc').limit(query.limit + 1).execute();
    const page = rows.slice(0, query.limit).map((row: Record<string, any>) => ({
      id: Number(row.id),
      request_id: row.request_id,
      connection_id: row.connection_id === null ? null : Number(row.connection_id),
      user_id: row.user_id === null ? null : Number(row.user_id),
      project_id: row.project_id === null ? null : Number(row.project_id),
      operation: row.operation,
      model: row.model,
      streamed: Boolean(Number(row.streamed)),
      status: row.status,
      error: row.error,
      latency_ms: Number(row.latency_ms),
      usage: { input_tokens: Number(row.input_tokens), output_tokens: Number(row.output_tokens) },
      cost_usd: Number(row.cost_usd),
      guardrails: JSON.parse(row.guardrails),
      prompt: row.prompt,
      answer: row.answer,
      created_at: row.created_at,
    }));
    return { items: page, next_cursor: rows.length > query.limit ? beforeIdCursor.encode(page[page.length - 1].id) : null };
  }

  /** Requests, tokens, cost and errors since `since`, by user, model, connection or project. */
  async usage(orgId: number, since: string, groupBy: UsageGroup) {
    const column = USAGE_GROUPS[groupBy];
    const rows = await this.storage.db
      .selectFrom('llm_mesh_calls')
      .select([
        sql.ref(column).as('group_key'),
        sql<number>`count(*)`.as('requests'),
        sql<number>`coalesce(sum(input_tokens), 0)`.as('input_tokens'),
        sql<number>`coalesce(sum(output_tokens), 0)`.as('output_tokens'),
        sql<number>`coalesce(sum(cost_usd), 0)`.as('cost_usd'),
        sql<number>`sum(case when status = 'ok' then 0 else 1 end)`.as('errors'),
      ])
      .where('org_id', '=', orgId)
      .where('created_at', '>=', since)
      .groupBy(column)
      .orderBy(sql`coalesce(sum(cost_usd), 0)`, 'desc')
      .execute();
    return rows.map((row: Record<string, any>) => ({
      [groupBy]: row.group_key === null ? null : groupBy === 'model' ? String(row.group_key) : Number(row.group_key),
      requests: Number(row.requests),
      input_tokens: Number(row.input_tokens),
      output_tokens: Number(row.output_tokens),
      cost_usd: roundUsd(Number(row.cost_usd)),
      errors: Number(row.errors),
    }));
  }

  /** What the calls a quota counts cost since `since`. */
  async spent(orgId: number, scope: SpendScope, since: string): Promise<number> {
    let select = this.storage.db.selectFrom('llm_mesh_calls').select(sql<number>`coalesce(sum(cost_usd), 0)`.as('spent')).where('org_id', '=', orgId).where('created_at', '>=', since);
    if (scope.column) select = select.where(scope.column, '=', scope.id);
    const row = await select.executeTakeFirstOrThrow();
    return Number(row.spent);
  }
}

/** Dollars to the micro-dollar: sums of floating-point costs answered without their binary noise. */
export const roundUsd = (usd: number) => Math.round(usd * 1e6) / 1e6;
