import { problems } from '../problem.ts';

export const PASSWORD_MIN_LENGTH = 10;
export const PASSWORD_MAX_LENGTH = 256;

// The most common passwords that satisfy the length rule; the list only needs to stop the obvious.
const COMMON = new Set([
  '1234567890', '12345678910', '0123456789', 'qwertyuiop', 'password12', 'password123', 'password1234', 'iloveyou12',
  'qwerty1234', 'qwerty12345', 'abcdefghij', 'abc1234567', '1q2w3e4r5t', '1qaz2wsx3edc', 'letmein123', 'welcome123',
  'administrator', 'changeme123', 'passw0rd123', 'football123', 'princess123', 'sunshine123', '1111111111', 'aaaaaaaaaa',
]);

/**
 * The password policy (README: "Password policy"): at least 10 characters, at most 256; letters and
 * at least one digit or symbol; not a well-known password; not containing the username or the
 * e-mail's local part. A violation is a 400 naming the rule.
 */
export function assertStrongPassword(password: string, user: { username?: string | null; email?: string | null }, field = 'new_password'): void {
  const fail = (rule: string) => {
    throw problems.badRequest(`password too weak: ${rule}`, [{ path: `body.${field}`, message: rule }]);
  };
  if (password.length < PASSWORD_MIN_LENGTH) fail(`must be at least ${PASSWORD_MIN_LENGTH} characters long`);
  if (password.length > PASSWORD_MAX_LENGTH) fail(`must be at most ${PASSWORD_MAX_LENGTH} characters long`);
  if (!/\p{L}/u.test(password) || !/[^\p{L}]/u.test(password)) fail('must mix letters with at least one digit or symbol');
  const lower = password.toLowerCase();
  if (COMMON.has(lower)) fail('is a well-known password');
  const names = [user.username, user.email?.split('@')[0]].filter((n): n is string => !!n && n.length >= 3).map((n) => n.toLowerCase());
  if (names.some((n) => lower.includes(n))) fail('must not contain the username or e-mail name');
}
