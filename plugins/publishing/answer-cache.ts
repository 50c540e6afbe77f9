import { actingUserId, andThen, JsonText, type Maybe } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog, DatasetInfo } from '../datasets/public.ts';
import type { GovernedSql } from '../sql/public.ts';
import type { CallInput, EndpointContext } from './call-input.ts';
import type { Endpoint } from './endpoints.ts';

/** Bytes of answers one instance keeps at most (their JSON text, counted twice for UTF-16); the least recently used go first. */
export const ANSWER_CACHE_BYTES = 64 * 1024 * 1024;

interface Entry {
  /** The answer as its JSON text: serialized once, when kept (its size is counted from it anyway). */
  answer: JsonText;
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

  answer(service: { id: number; updated_at: string }, endpoint: Endpoint, input: CallInput, context: EndpointContext, run: () => Promise<unknown>): Maybe<unknown> {
    if (!cacheable(endpoint)) return run();
    return andThen(this.keyOf(service, endpoint, input, context), (key) => this.lookup(key, endpoint, run));
  }

  private lookup(key: string, endpoint: CacheableEndpoint, run: () => Promise<unknown>): Maybe<unknown> {
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
    const computing = run()
      .then((answer) => {
        this.keep(key, answer, endpoint.config.cache_ttl_s);
        return answer;
      })
      .finally(() => this.running.delete(key));
    this.running.set(key, computing);
    return computing;
  }

  /** The answer's cache key; at hand when the dataset and the publisher's row scope are in memory. */
  private keyOf(service: { id: number; updated_at: string }, endpoint: CacheableEndpoint, input: CallInput, context: EndpointContext): Maybe<string> {
    const { publisher, orgId } = context;
    if (endpoint.kind === 'lookup') {
      return andThen(this.deps.catalog.get(orgId, endpoint.config.dataset_id), (dataset) =>
        andThen(this.deps.catalog.scope(publisher, dataset), (scope) => keyFor(service, endpoint, input, context, [stateOf(dataset, scope)])),
      );
    }
    return this.deps.sql.reads({ sql: endpoint.config.query }, orgId).then(async (datasets) => {
      const reads: string[] = [];
      for (const dataset of datasets) reads.push(stateOf(dataset, await this.deps.catalog.scope(publisher, dataset)));
      return keyFor(service, endpoint, input, context, reads);
    });
  }

  private keep(key: string, answer: unknown, ttlSeconds: number): void {
    const json = new JsonText(answer);
    const bytes = json.text.length * 2;
    if (bytes > this.budgetBytes / 16) return; // one answer never takes a sixteenth of the budget
    const previous = this.entries.get(key);
    if (previous) this.forget(key, previous);
    this.entries.set(key, { answer: json, bytes, expiresAt: Date.now() + ttlSeconds * 1000 });
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

/** A dataset as an answer read it: its version and the rows the publisher sees of it (its row scope). */
const stateOf = (dataset: DatasetInfo, scope: { key: string }) => `${dataset.id}@${dataset.version}:${scope.key}`;

/** Everything an answer depends on, as one string: the service as it is, the endpoint, the publisher and whether PII reads in clear for them, the datasets read, the key's fixed inputs and the caller's. */
function keyFor(service: { id: number; updated_at: string }, endpoint: Endpoint, input: CallInput, { publisher, fixed }: EndpointContext, reads: string[]): string {
  return JSON.stringify([service.id, service.updated_at, endpoint.name, actingUserId(publisher), publisher.capabilities.has('datasets.pii.read'), reads, fixed, input.source, input.values]);
}
