import pino, { type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * Paths pino blanks in every log line, wherever a careless caller puts them: credentials must
 * never reach a log (ARCHITECTURE: errors, logs, settings).
 */
const REDACTED_PATHS = [
  'password', '*.password', '*.*.password', 'new_password', '*.new_password', 'old_password', '*.old_password',
  'token', '*.token', 'secret', '*.secret', '*.*.secret', 'authorization', '*.authorization', '*.headers.authorization',
  '*.headers["x-api-key"]', 'jwtSecret', 'patHashKey', 'vaultKey', 'config.*.password', 'config.*.token',
];

/** The user-info part of a URL (`scheme://user:password@`), up to the authority's last `@`. */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#]*@/gi;
/** Deep enough for an error's own fields and its nested errors; also what stops a cycle. */
const MAX_DEPTH = 6;
const SERIALIZED_ERROR = Object.getPrototypeOf(pino.stdSerializers.err(new Error()));

/** Strings with URL credentials blanked, and objects without `input`, recursively. */
function scrub(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return value.replace(URL_CREDENTIALS, '$1[redacted]@');
  if (depth >= MAX_DEPTH || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((item) => scrub(item, depth + 1));
  const proto = Object.getPrototypeOf(value);
  // Only what serializes as its own fields; a Date or a Buffer stays as it is.
  if (proto !== Object.prototype && proto !== null && proto !== SERIALIZED_ERROR) return value;
  return Object.fromEntries(Object.entries(value).filter(([key]) => key !== 'input').map(([key, field]) => [key, scrub(field, depth + 1)]));
}

/**
 * Errors as pino's standard serializer writes them, minus what carries credentials: Node's URL
 * errors keep the whole URL, password included, in `input` (dropped), and a URL with user info
 * anywhere in the error has it blanked.
 */
function serializeError(err: unknown): unknown {
  return scrub(pino.stdSerializers.err(err as Error), 0);
}

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({ level, base: undefined, redact: { paths: REDACTED_PATHS, censor: '[redacted]' }, serializers: { err: serializeError } }, destination);
}
