/** A request header by its lower-case name, as `req.headers` would hold it. */
export type RequestHeaders = (name: string) => string | undefined;

/** Headers Node keeps the first of when sent twice (its `matchKnownFields`); the others the request path reads are joined. */
const FIRST_WINS: ReadonlySet<string> = new Set(['authorization', 'content-type', 'content-length', 'host', 'user-agent']);

/**
 * A header off a request's raw header list (`req.rawHeaders`), rather than `req.headers`: Node
 * builds that object (every header, lower-cased) on first access, which cost more than the rest of
 * reading the three headers a cached call needs. Same value as `req.headers` holds: a header sent
 * twice is its values joined by ", ", except those Node keeps the first of.
 */
export function rawHeader(raw: readonly string[], name: string): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const field = raw[i];
    if (field.length !== name.length || field.toLowerCase() !== name) continue;
    if (value === undefined) value = raw[i + 1];
    else if (FIRST_WINS.has(name)) return value;
    else value = `${value}, ${raw[i + 1]}`;
  }
  return value;
}
