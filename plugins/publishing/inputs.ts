import { problems } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog } from '../datasets/public.ts';

/** The types an endpoint input (a SQL parameter, a lookup key or a fixed parameter) may have. */
export const INPUT_TYPES = ['string', 'integer', 'number', 'boolean', 'date', 'timestamp'] as const;
export type InputType = (typeof INPUT_TYPES)[number];

/** The longest text an input may carry: a bound value, but not a way to make the database read megabytes. */
export const MAX_INPUT_TEXT = 10_000;

/**
 * Names an input (a SQL parameter, a lookup key column, a fixed parameter) may not have: objects
 * read them off their prototype, and zod's records silently drop a `__proto__` key (a JSON body
 * holding one is refused before, by the HTTP layer's parser).
 */
const RESERVED_INPUT_NAMES: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);
export const notReservedName = (name: string) => !RESERVED_INPUT_NAMES.has(name);
export const RESERVED_NAME_MESSAGE = 'is reserved (__proto__, constructor and prototype name no input)';

/** Where an input came from: a query string carries text, a JSON body typed values. */
export type InputSource = 'query' | 'body';

const INTEGER_TEXT = /^-?\d{1,16}$/;
/** Linear in the text's length (no two quantifiers may match the same digits), and only tried on texts of at most MAX_NUMBER_TEXT. */
const NUMBER_TEXT = /^-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d{1,3})?$/;
/** Longer than any number a double tells apart (309 digits, a point and a few decimals): refused unread. */
const MAX_NUMBER_TEXT = 400;

/** A query string's text as the JSON value it stands for (left as is when it fits no form: the type check refuses it). */
function fromText(type: InputType, text: string): unknown {
  if (type === 'integer' && INTEGER_TEXT.test(text)) return Number(text);
  if (type === 'number' && text.length <= MAX_NUMBER_TEXT && NUMBER_TEXT.test(text)) return Number(text);
  if (type === 'boolean' && (text === 'true' || text === 'false')) return text === 'true';
  return text;
}

/**
 * A caller's value for an input of `type`, checked and typed (dates and timestamps as ISO text), or
 * a 400 naming `path` (e.g. `query.region`). The value is only ever bound, never spliced into SQL;
 * still, a NUL (which Postgres text cannot hold) and huge texts are refused here, the same on both
 * adapters. Null stays null.
 */
export function typedInput(type: InputType, value: unknown, source: InputSource, path: string, parse: DatasetCatalog['parseValue']): unknown {
  const refuse = (message: string) => problems.badRequest(`${path}: ${message}`, [{ path, message }]);
  if (value === null) return null;
  if (typeof value === 'object') throw refuse(`expected one ${type} value`);
  if (typeof value === 'string') {
    if (value.length > MAX_INPUT_TEXT) throw refuse(`must be at most ${MAX_INPUT_TEXT} characters`);
    if (value.includes('\0')) throw refuse('must not contain a NUL character');
  }
  try {
    return parse(type, source === 'query' && typeof value === 'string' ? fromText(type, value) : value);
  } catch (err) {
    throw refuse((err as Error).message);
  }
}
