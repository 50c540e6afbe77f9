/**
 * A value when it is at hand, a promise when it must be fetched: callers `await` either. Used on the
 * request path, where a promise layer around a cached value costs more than the lookup itself.
 */
export type Maybe<T> = T | Promise<T>;

/** `use(value)` now when the value is at hand, else when it arrives. */
export function andThen<T, U>(value: Maybe<T>, use: (value: T) => Maybe<U>): Maybe<U> {
  return value instanceof Promise ? value.then(use) : use(value);
}
