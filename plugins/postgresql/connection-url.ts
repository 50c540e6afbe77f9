import type { SourceConfig } from './source.ts';

const SHAPE = /^postgres(ql)?:\/\/[^/]+\/[^/?]+/;

export const CONNECTION_URL_MESSAGE = 'must be a postgres://user:password@host:port/database URL (port 1-65535, valid %-escapes)';

/**
 * The connection fields of a postgres:// URL and its `sslmode`, or null when it is not one.
 * Parse errors are dropped on purpose, never rethrown: Node's URL error carries the whole URL,
 * password included, in `err.input`, and would put it in the log of a 500.
 */
export function parseConnectionUrl(text: string): (Omit<SourceConfig, 'ssl'> & { sslmode: string | null }) | null {
  if (!SHAPE.test(text)) return null;
  try {
    const url = new URL(text);
    const port = Number(url.port || 5432);
    if (port < 1) return null;
    return {
      host: url.hostname,
      port,
      database: decodeURIComponent(url.pathname.slice(1)),
      user: decodeURIComponent(url.username),
      password: url.password ? decodeURIComponent(url.password) : undefined,
      sslmode: url.searchParams.get('sslmode'),
    };
  } catch {
    return null;
  }
}
