import { actingUserId, type Principal } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog, DatasetInfo } from '../datasets/public.ts';
import type { GovernedSql } from '../sql/public.ts';
import type { CallInput, EndpointContext } from './call-input.ts';
import type { Endpoint } from './endpoints.ts';

/** Bytes of answers one instance keeps at most (their JSON text, counted twice for UTF-16); the least recently used go first. */
export const ANSWER_CACHE_BYTES = 64 * 1024 * 1024;

interface Entry {
  answer: unknown;
  bytes: number;
  expiresAt: number;
}

/** The endpoints whose answers may be cached: those reading datasets. */
type CacheableEndpoint = Extract<Endpoint, { kind: 'sql' | 'lookup' }>;
const cacheable = (endpoint: Endpoint): endpoint is CacheableEndpoint => (endpoint.kind === 'sql' || endpoint.kind === 'lookup') && endpoint.config.cache_ttl_s > 0;

/**
 * Answers of `sql` and `lookup` endpoints with a `cache_ttl_s`, kept in this instance's memory for
 * that long, under a key made of everything the answer depends on: the service and its endpoints
 * as they are now (`updated_at`), the inputs and the key's fixed ones, the publisher, whether PII
 * reads in clear for them, and for each dataset read its version and the publisher's row scope
 * (which row policies apply). A load of new data, a changed row policy or group membership makes
 * another key, so a change is never served stale, on any instance; only an answer the TTL has not
 * expired is served. Concurrent calls missing the same key share one run. Errors are not kept.
 */
export class AnswerCache {
  private readonly entries = new Map<string, Entry>();
  private readonly running = new Map<string, Promise<unknown>>();
  private bytes = 0;

  constructor(
    private readonly deps: { catalog: DatasetCatalog; sql: GovernedSql },
    private readonly budgetBytes = ANSWER_CACHE_BYTES,
  ) {}

  async answer(service: { id: number; updated_at: string }, endpoint: Endpoint, input: CallInput, context: EndpointContext, run: () => Promise<unknown>): Promise<unknown> {
    if (!cacheable(endpoint)) return run();
    const key = await this.keyOf(service, endpoint, input, context);
    const hit = this.entries.get(key);
    if (hit && hit.expiresAt > Date.now()) {
      // Moved to the end: the map's order is the order of last use.
      this.entries.delete(key);
      this.entries.set(key, hit);
      return hit.answer;
    }
    if (hit) this.forget(key, hit);
    const pending = this.running.get(key);
    if (pending) return pending;
    const computing = run().then((answer) => {
      this.keep(key, answer, endpoint.config.cache_ttl_s);
      return answer;
    });
    this.running.set(key, computing);
    try {
      return await computing;
    } finally {
      this.running.delete(key);
    }
  }

  private async keyOf(service: { id: number; updated_at: string }, endpoint: CacheableEndpoint, input: CallInput, context: EndpointContext): Promise<string> {
    const datasets = endpoint.kind === 'lookup' ? [await this.deps.catalog.get(context.orgId, endpoint.config.dataset_id)] : await this.deps.sql.reads({ sql: endpoint.config.query }, context.orgId);
    const reads = await Promise.all(datasets.map((dataset) => this.stateOf(context.publisher, dataset)));
    const { publisher } = context;
    return JSON.stringify([service.id, service.updated_at, endpoint.name, actingUserId(publisher), publisher.capabilities.has('datasets.pii.read'), reads, context.fixed, input.source, input.values]);
  }

  /** A dataset as the answer read it: its version and the rows the publisher sees of it. */
  private async stateOf(publisher: Principal, dataset: DatasetInfo): Promise<string> {
    const scope = await this.deps.catalog.scope(publisher, dataset);
    return `${dataset.id}@${dataset.version}:${scope.key}`;
  }

  private keep(key: string, answer: unknown, ttlSeconds: number): void {
    const bytes = JSON.stringify(answer).length * 2;
    if (bytes > this.budgetBytes / 16) return; // one answer never takes a sixteenth of the budget
    const previous = this.entries.get(key);
    if (previous) this.forget(key, previous);
    this.entries.set(key, { answer, bytes, expiresAt: Date.now() + ttlSeconds * 1000 });
    this.bytes += bytes;
    for (const [oldest, entry] of this.entries) {
      if (this.bytes <= this.budgetBytes) break;
      this.forget(oldest, entry);
    }
  }

  private forget(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.bytes -= entry.bytes;
  }
}
