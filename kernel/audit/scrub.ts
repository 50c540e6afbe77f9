const SECRET_KEY = /(pass(word)?|secret|token|authorization|api[_-]?key|credential|cookie)$/i;
/** Keys that name a secret's *id* or *metadata*, which the audit log keeps. */
const ALLOWED = new Set(['token_id', 'token_name', 'token_prefix']);

/** A copy of `value` with every secret-looking field replaced: audit rows never hold a secret. */
export function scrubSecrets(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(scrubSecrets);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).map(([key, v]) => [key, SECRET_KEY.test(key) && !ALLOWED.has(key) ? '[redacted]' : scrubSecrets(v)]),
  );
}
