import { andThen, type Maybe } from './maybe.ts';
import type { Storage } from '../storage/index.ts';

/** Entries a cache keeps at most; past it the oldest go first. */
const DEFAULT_CAPACITY = 10_000;

/**
 * Values read from the database, kept until a change counter moves (see `Storage.trackChanges`:
 * the database bumps it in the same transaction as any write to the tables it tracks, whoever
 * writes). Every `get` checks the counter first (`Storage.changeCounter`: mostly a number kept in
 * memory), so a value is not served once a change is seen, while an unchanged value costs no read
 * of its own. A value at hand is answered as is, not in a promise: the request path reads several
 * of these, and each promise layer there costs more than the lookup it wraps.
 */
export class ChangeCountedCache<K, V> {
  private readonly entries = new Map<K, V>();
  private seen: number | undefined;

  constructor(
    private readonly storage: Pick<Storage, 'changeCounter'>,
    private readonly counter: string,
    private readonly capacity = DEFAULT_CAPACITY,
  ) {}

  get(key: K, read: () => Promise<V>): Maybe<V> {
    return andThen(this.storage.changeCounter(this.counter), (counter) => {
      if (counter !== this.seen) {
        this.entries.clear();
        this.seen = counter;
      }
      if (this.entries.has(key)) return this.entries.get(key)!;
      return read().then((value) => {
        // Kept under the counter checked before it: a change committed meanwhile moved the counter, and the next get reads again.
        if (this.seen === counter) {
          if (this.entries.size >= this.capacity) this.entries.delete(this.entries.keys().next().value!);
          this.entries.set(key, value);
        }
        return value;
      });
    });
  }
}
