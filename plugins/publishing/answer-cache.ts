import { actingUserId, andThen, JsonText, type Maybe } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog, DatasetInfo } from '../datasets/public.ts';
import type { GovernedSql } from '../sql/public.ts';
import type { CallInput, EndpointContext } from './call-input.ts';
import type { Endpoint } from './endpoints.ts';

/** Bytes of answers one instance keeps at most (their JSON text, counted twice for UTF-16); the least recently used go first. */
export const ANSWER_CACHE_BYTES = 64 * 1024 * 1024;

/** Shared parts whose ids are remembered at most (each endpoint's states: services, publishers, dataset versions). */
const MAX_SHARED_IDS = 10_000;

interface Entry {
  /** The answer as its JSON text: serialized once, when kept (its size is counted from it anyway). */
  answer: JsonText;
  bytes: number;
  expiresAt: number;
}

/** A service as the cache keys its answers: by its id and when it last changed. */
type CachedService = { id: number; updated_at: string };
/** A dataset an answer reads, and the key of the publisher's row scope on it. */
interface Read {
  dataset: DatasetInfo;
  scopeKey: string;
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
  /** Per endpoint: the part of its answers' keys every input shares (as its short id), and the objects it was made of. */
  private readonly shared = new WeakMap<Endpoint, { parts: unknown[]; id: string }>();
  /**
   * The short id of each shared part's text. An answer's key is that id and the inputs, not the long
   * text itself: a key is made anew and hashed on every call, and hashing the text was the largest
   * cost of a cached answer. Ids are never reused, so a forgotten text can never reach another's answers.
   */
  private readonly idsOfShared = new Map<string, string>();
  private nextSharedId = 0;
  private bytes = 0;
  /** The key used last (the end of `entries`' order): a hot answer asked again is not moved. */
  private newest: string | undefined;

  constructor(
    private readonly deps: { catalog: DatasetCatalog; sql: GovernedSql },
    private readonly budgetBytes = ANSWER_CACHE_BYTES,
  ) {}

  answer(service: CachedService, endpoint: Endpoint, input: CallInput, context: EndpointContext, run: () => Promise<unknown>): Maybe<unknown> {
    if (!cacheable(endpoint)) return run();
    return andThen(this.keyOf(service, endpoint, input, context), (key) => this.lookup(key, endpoint, run));
  }

  private lookup(key: string, endpoint: CacheableEndpoint, run: () => Promise<unknown>): Maybe<unknown> {
    const hit = this.entries.get(key);
    if (hit && hit.expiresAt > Date.now()) {
      // Moved to the end: the map's order is the order of last use.
      if (key !== this.newest) {
        this.entries.delete(key);
        this.entries.set(key, hit);
        this.newest = key;
      }
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
  private keyOf(service: CachedService, endpoint: CacheableEndpoint, input: CallInput, context: EndpointContext): Maybe<string> {
    const { publisher, orgId } = context;
    if (endpoint.kind === 'lookup') {
      return andThen(this.deps.catalog.get(orgId, endpoint.config.dataset_id), (dataset) =>
        andThen(this.deps.catalog.scope(publisher, dataset), (scope) => this.keyFor(service, endpoint, input, context, [{ dataset, scopeKey: scope.key }])),
      );
    }
    return this.deps.sql.reads({ sql: endpoint.config.query }, orgId).then(async (datasets) => {
      const reads: Read[] = [];
      for (const dataset of datasets) reads.push({ dataset, scopeKey: (await this.deps.catalog.scope(publisher, dataset)).key });
      return this.keyFor(service, endpoint, input, context, reads);
    });
  }

  /**
   * Everything an answer depends on, as one string: what every input of the endpoint shares (the
   * service as it is, the endpoint, the publisher and whether PII reads in clear for them, the datasets
   * read with their row scopes, the key's fixed inputs), then the caller's inputs. The shared part is
   * made once per endpoint and kept while it is made of the same objects (a change of any makes new ones).
   */
  private keyFor(service: CachedService, endpoint: Endpoint, input: CallInput, { publisher, fixed }: EndpointContext, reads: Read[]): string {
    const parts: unknown[] = [service, publisher, fixed];
    for (const { dataset, scopeKey } of reads) parts.push(dataset, scopeKey);
    let shared = this.shared.get(endpoint);
    if (!shared || !sameParts(shared.parts, parts)) {
      const datasets = reads.map(({ dataset, scopeKey }) => stateOf(dataset, scopeKey));
      const text = JSON.stringify([service.id, service.updated_at, endpoint.name, actingUserId(publisher), publisher.capabilities.has('datasets.pii.read'), datasets, fixed]);
      this.shared.set(endpoint, (shared = { parts, id: this.idOfShared(text) }));
    }
    // An id then a JSON text: the id's end (the text's opening bracket) is unambiguous.
    return shared.id + JSON.stringify([input.source, input.values]);
  }

  private idOfShared(text: string): string {
    let id = this.idsOfShared.get(text);
    if (id === undefined) {
      // Texts of states long gone (older dataset versions…) are dropped now and then; their answers age out.
      if (this.idsOfShared.size >= MAX_SHARED_IDS) this.idsOfShared.clear();
      this.idsOfShared.set(text, (id = (this.nextSharedId += 1).toString(36)));
    }
    return id;
  }

  private keep(key: string, answer: unknown, ttlSeconds: number): void {
    const json = new JsonText(answer);
    const bytes = json.text.length * 2;
    if (bytes > this.budgetBytes / 16) return; // one answer never takes a sixteenth of the budget
    const previous = this.entries.get(key);
    if (previous) this.forget(key, previous);
    this.entries.set(key, { answer: json, bytes, expiresAt: Date.now() + ttlSeconds * 1000 });
    this.newest = key;
    this.bytes += bytes;
    for (const [oldest, entry] of this.entries) {
      if (this.bytes <= this.budgetBytes) break;
      this.forget(oldest, entry);
    }
  }

  private forget(key: string, entry: Entry): void {
    this.entries.delete(key);
    if (key === this.newest) this.newest = undefined;
    this.bytes -= entry.bytes;
  }
}

/**
 * A dataset as an answer read it: its version, its PII columns (flagging one is no new version, yet it
 * masks that column from then on) and the rows the publisher sees of it (its row scope's key).
 */
const stateOf = (dataset: DatasetInfo, scopeKey: string) => `${dataset.id}@${dataset.version}:${piiColumns(dataset)}:${scopeKey}`;

const piiColumns = (dataset: DatasetInfo) => JSON.stringify(dataset.columns.filter((c) => c.pii).map((c) => c.name));

/** Whether two lists hold the same values, objects compared by identity. */
function sameParts(a: readonly unknown[], b: readonly unknown[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i += 1) if (a[i] !== b[i]) return false;
  return true;
}
