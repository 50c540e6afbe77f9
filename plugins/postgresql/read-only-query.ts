import { problems } from '../../kernel/plugin-api.ts';
import { parseSelect, SelectRefusedError } from '../../storage/index.ts';

/**
 * The text of an import query once it is known to be exactly one SELECT (WITH allowed), without
 * a trailing semicolon. This answers a clear 400 before anything reaches the source; it is not the
 * only guard, since a parser can read SQL differently from Postgres (`'a\'; delete …` is one
 * string here, but two statements there): the query is also sent with the extended protocol, which
 * refuses several statements, inside a read-only transaction.
 */
export function readOnlyQuery(text: string): string {
  try {
    return parseSelect(text, 'PostgresQL').sql;
  } catch (err) {
    if (!(err instanceof SelectRefusedError)) throw err;
    throw problems.badRequest(`the import query is refused: ${err.message}`, [{ path: 'body.query', message: err.message }]);
  }
}
