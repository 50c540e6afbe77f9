import type Database from 'better-sqlite3';
import { asBoolean, bindAll, booleanColumns } from './sqlite-portable-values.mjs';
import { endsOrMakesWrite, type WriteClock } from './write-clock.ts';

/**
 * SQLite has no boolean or timestamp type and better-sqlite3 binds neither `true` nor a `Date`.
 * This wrapper closes the gap so code above `storage/` sees the same values as on Postgres:
 * booleans and Dates are bound as 1/0 and ISO strings, and columns declared `boolean` read back
 * as `true`/`false`. Every statement that writes (or ends a transaction) ticks `writes`.
 */
export function withPortableValues(database: Database.Database, writes: WriteClock): Database.Database {
  const cache = new Map<string, Database.Statement>();
  return new Proxy(database, {
    get(target, property) {
      if (property !== 'prepare') return bindNative(target, property);
      return (source: string) => {
        // Kysely prepares every query anew; preparing costs more than running a small query, so
        // statements are reused (a fresh one when the cached one is still iterating).
        const cached = cache.get(source);
        if (cached && !cached.busy) return cached;
        const prepared = target.prepare(source);
        const statement = portableStatement(prepared, endsOrMakesWrite(source, prepared.readonly) ? writes : null);
        if (!cached) {
          if (cache.size >= STATEMENT_CACHE_SIZE) cache.delete(cache.keys().next().value!);
          cache.set(source, statement);
        }
        return statement;
      };
    },
  });
}

const STATEMENT_CACHE_SIZE = 500;

/** A property of a native object, read and (for methods) bound with the real object as `this`. */
function bindNative(target: object, property: string | symbol): unknown {
  const value = Reflect.get(target, property, target);
  return typeof value === 'function' ? value.bind(target) : value;
}

function portableStatement(statement: Database.Statement, writes: WriteClock | null): Database.Statement {
  const booleans = booleanColumns(statement).map((c) => c.name);
  const decode = (row: unknown) => {
    if (!booleans.length || row === undefined || row === null) return row;
    const record = row as Record<string, unknown>;
    for (const name of booleans) record[name] = asBoolean(record[name]);
    return record;
  };
  return new Proxy(statement, {
    get(target, property) {
      switch (property) {
        case 'all':
          return (...params: unknown[]) => ticked(writes, (target.all(...bindAll(params)) as unknown[]).map(decode));
        case 'get':
          return (...params: unknown[]) => ticked(writes, decode(target.get(...bindAll(params))));
        case 'run':
          return (...params: unknown[]) => ticked(writes, target.run(...bindAll(params)));
        case 'iterate':
          return function* (...params: unknown[]) {
            for (const row of target.iterate(...bindAll(params))) yield decode(row);
            writes?.tick();
          };
        default:
          return bindNative(target, property);
      }
    },
  });
}

/** Ticks the clock once a writing statement has run (its result passes through). */
function ticked<T>(writes: WriteClock | null, result: T): T {
  writes?.tick();
  return result;
}
