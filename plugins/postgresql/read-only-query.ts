import { problems } from '../../kernel/plugin-api.ts';
import { parsePostgresSelect, SelectRefusedError } from '../../storage/index.ts';

/**
 * The text of an import query once it is known to be exactly one SELECT (WITH allowed), without
 * a trailing semicolon, read by Postgres's own parser. This answers a clear 400 before anything
 * reaches the source; the query is also sent with the extended protocol, which refuses several
 * statements, inside a read-only transaction, so the source itself refuses what would write.
 */
export async function readOnlyQuery(text: string): Promise<string> {
  try {
    return (await parsePostgresSelect(text)).sql;
  } catch (err) {
    if (!(err instanceof SelectRefusedError)) throw err;
    throw problems.badRequest(`the import query is refused: ${err.message}`, [{ path: 'body.query', message: err.message }]);
  }
}
