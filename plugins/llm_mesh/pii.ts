import net from 'node:net';
import { RE2JS } from 're2js';

export const PII_KINDS = ['email', 'phone', 'payment_card', 'iban', 'ip_address'] as const;
export type PiiKind = (typeof PII_KINDS)[number];

/** Where a detector found something in a text: [start, end) in UTF-16 units. */
export interface Finding {
  kind: string;
  start: number;
  end: number;
}

/** The Luhn checksum every payment card number carries. */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let digit = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
  }
  return sum % 10 === 0;
}

/** ISO 13616's check: the IBAN rearranged (country and check digits last), letters as 10..35, is 1 modulo 97. */
export function ibanValid(compact: string): boolean {
  const rearranged = compact.slice(4) + compact.slice(0, 4);
  let remainder = 0;
  for (const char of rearranged) {
    const value = char >= 'A' ? char.charCodeAt(0) - 55 : char.charCodeAt(0) - 48;
    remainder = value > 9 ? (remainder * 100 + value) % 97 : (remainder * 10 + value) % 97;
  }
  return remainder === 1;
}

// Candidates are found by patterns with no nested quantifiers (linear on any input); the checksums
// and digit counts then decide. Each is global; `lastIndex` is reset by matchAll.
const EMAIL = /[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}/g;
const CARD = /(?<![\dA-Za-z])\d(?:[ -]?\d){12,18}(?![\dA-Za-z])/g;
const IBAN = /(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])/g;
// Not a piece of a longer run of digits (a number too long to be a phone number is not cut into one).
const PHONE = /(?<![\w+]|\d[ .()-])(?:\+|00)?\d(?:[ .()-]{0,2}\d){7,14}(?![\w]|[ .()-]\d)/g;
const IPV4 = /(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])/g;
const IPV6 = /(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])/g;

const digitsOf = (text: string) => text.replace(/\D/g, '');

function* matches(pattern: RegExp, text: string, kind: string, accept: (match: string) => boolean): Generator<Finding> {
  for (const match of text.matchAll(pattern)) if (accept(match[0])) yield { kind, start: match.index, end: match.index + match[0].length };
}

const DETECTORS: Record<PiiKind, (text: string) => Iterable<Finding>> = {
  email: (text) => matches(EMAIL, text, 'email', () => true),
  payment_card: (text) => matches(CARD, text, 'payment_card', (m) => luhnValid(digitsOf(m))),
  iban: (text) => matches(IBAN, text, 'iban', (m) => ibanValid(m.replace(/ /g, ''))),
  phone: (text) =>
    matches(PHONE, text, 'phone', (m) => {
      const digits = digitsOf(m).length;
      // International numbers have 8 to 15 digits (E.164); a date or an amount is not a phone number.
      return digits >= 8 && digits <= 15 && !/^\d{4}-\d{2}-\d{2}$/.test(m);
    }),
  ip_address: (text) => [...matches(IPV4, text, 'ip_address', (m) => net.isIPv4(m)), ...matches(IPV6, text, 'ip_address', (m) => net.isIPv6(m) && m.replace(/:/g, '').length >= 4)],
};

/** The kinds' findings in the text, the longest first where two overlap (a card number is not also a phone number). */
export function findPii(text: string, kinds: readonly PiiKind[]): Finding[] {
  const order: PiiKind[] = ['email', 'iban', 'payment_card', 'ip_address', 'phone'];
  const found: Finding[] = [];
  for (const kind of order) {
    if (!kinds.includes(kind)) continue;
    for (const finding of DETECTORS[kind](text)) if (!found.some((f) => f.start < finding.end && finding.start < f.end)) found.push(finding);
  }
  return found.sort((a, b) => a.start - b.start);
}

/** A pattern of the connection's own, run by RE2 (linear time: no pattern makes a prompt take long). */
export function compilePattern(pattern: string): RE2JS {
  return RE2JS.compile(pattern);
}

export function findPattern(compiled: RE2JS, text: string, kind: string): Finding[] {
  const found: Finding[] = [];
  const matcher = compiled.matcher(text);
  while (matcher.find()) {
    const start = matcher.start();
    const end = matcher.end();
    if (end > start) found.push({ kind, start, end });
  }
  return found;
}
