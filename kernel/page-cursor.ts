import { problems } from './problem.ts';

/**
 * Page cursors as clients see them (`next_cursor`, `cursor`): opaque base64url JSON that only this
 * server writes. A route's own value (a last id, an offset) goes in and comes back checked.
 */
export const pageCursor = {
  encode: (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url'),
  /** The value inside a cursor this server issued and `accepts` takes; anything else is a 400 naming `query.cursor`. */
  decode<T>(cursor: string, accepts: (value: Record<string, unknown>) => boolean): T {
    try {
      const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
      if (typeof value === 'object' && value !== null && accepts(value)) return value as T;
    } catch {
      // fall through: not JSON, so not ours
    }
    throw problems.badRequest('cursor is not one this server issued', [{ path: 'query.cursor', message: 'invalid cursor' }]);
  },
};

/** Cursors of lists newest first by id: a page's cursor holds the id the next page's items come before. */
export const beforeIdCursor = {
  encode: (id: number): string => pageCursor.encode({ before: id }),
  decode: (cursor: string): number => pageCursor.decode<{ before: number }>(cursor, (value) => Number.isSafeInteger(value.before)).before,
};
