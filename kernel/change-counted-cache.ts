import type { Storage } from '../storage/index.ts';

/** Entries a cache keeps at most; past it the oldest go first. */
const DEFAULT_CAPACITY = 10_000;

/**
 * Values read from the database, kept until a change counter moves (see `Storage.trackChanges`:
 * the database bumps it in the same transaction as any write to the tables it tracks, whoever
 * writes). Every `get` reads the counter first (on SQLite a cached number, on Postgres one query
 * shared by the requests waiting for it), so a value is never served once a change committed, on
 * any instance, while an unchanged value costs no read of its own.
 */
export class ChangeCountedCache<K, V> {
  private readonly entries = new Map<K, V>();
  private seen: number | undefined;

  constructor(
    private readonly storage: Pick<Storage, 'changeCounter'>,
    private readonly counter: string,
    private readonly capacity = DEFAULT_CAPACITY,
  ) {}

  async get(key: K, read: () => Promise<V>): Promise<V> {
    const counter = await this.storage.changeCounter(this.counter);
    if (counter !== this.seen) {
      this.entries.clear();
      this.seen = counter;
    }
    if (this.entries.has(key)) return this.entries.get(key)!;
    const value = await read();
    // Kept under the counter read before it: a change committed meanwhile moved the counter, and the next get reads again.
    if (this.seen === counter) {
      if (this.entries.size >= this.capacity) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(key, value);
    }
    return value;
  }
}
