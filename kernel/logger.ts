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

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino({ level, base: undefined, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } }, destination);
}
