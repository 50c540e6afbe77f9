import type { DataColumnType } from '../../storage/index.ts';

/** A value that does not fit its column: the caller adds where (line, row index) it was. */
export class ValueError extends Error {}

const INTEGER = /^[+-]?\d+$/;
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/;
const TRUE = new Set(['true', 't', 'yes', 'y', '1']);
const FALSE = new Set(['false', 'f', 'no', 'n', '0']);

/** The number written by `count` ASCII digits of `text` from `at` (the caller has checked they are digits). */
function digits(text: string, at: number, count: number): number {
  let value = 0;
  for (let i = at; i < at + count; i += 1) value = value * 10 + text.charCodeAt(i) - 48;
  return value;
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const isLeapYear = (year: number) => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;

/** A YYYY-MM-DD text (checked by DATE) names a day of the calendar, year 1 to 9999 (Postgres has no year 0). */
function validDate(text: string): boolean {
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  return day <= (month === 2 && isLeapYear(year) ? 29 : DAYS_IN_MONTH[month - 1]);
}

/** UTC timestamps as exporters write them (`…T12:34:56Z`, `….123Z`), already in the stored form but for the milliseconds. */
const UTC_SECONDS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$/;

const parseInteger = (text: string): unknown => {
  if (text === '') return null;
  const value = Number(text);
  if (!INTEGER.test(text) || !Number.isSafeInteger(value)) throw new ValueError(`"${clip(text)}" is not an integer`);
  return value;
};

const parseNumber = (text: string): unknown => {
  if (text === '') return null;
  const value = Number(text);
  if (!NUMBER.test(text) || !Number.isFinite(value)) throw new ValueError(`"${clip(text)}" is not a number`);
  return value;
};

const parseBoolean = (text: string): unknown => {
  if (text === '') return null;
  const lower = text.toLowerCase();
  if (TRUE.has(lower)) return true;
  if (FALSE.has(lower)) return false;
  throw new ValueError(`"${clip(text)}" is not a boolean (true/false, yes/no, 1/0)`);
};

const parseDate = (text: string): unknown => {
  if (text === '') return null;
  if (!DATE.test(text) || !validDate(text)) throw new ValueError(`"${clip(text)}" is not a date (YYYY-MM-DD)`);
  return text;
};

/**
 * Any ISO-8601 timestamp of a real calendar day (Date.parse alone would roll 2023-02-29 over to
 * March), stored as UTC with milliseconds; the common UTC form is checked without a Date object.
 */
const parseTimestamp = (text: string): unknown => {
  if (text === '') return null;
  if (!TIMESTAMP.test(text) || !validDate(text)) throw notTimestamp(text);
  if (UTC_SECONDS.test(text) && digits(text, 11, 2) < 24 && digits(text, 14, 2) < 60 && digits(text, 17, 2) < 60) {
    return text.length === 24 ? text : `${text.slice(0, 19)}.000Z`;
  }
  const time = Date.parse(text.replace(' ', 'T'));
  if (Number.isNaN(time)) throw notTimestamp(text);
  const utc = new Date(time).toISOString();
  // An offset may carry a day of year 9999 or 1 past the end of the calendar once in UTC (`+010000-…`, `0000-…`).
  if (!IN_CALENDAR.test(utc)) throw new ValueError(`"${clip(text)}" falls outside the years 0001 to 9999 once in UTC`);
  return utc;
};

/** A UTC ISO-8601 text of years 0001 to 9999 (what both databases store). */
const IN_CALENDAR = /^(?!0000)\d{4}-/;

const notTimestamp = (text: string) => new ValueError(`"${clip(text)}" is not an ISO-8601 timestamp`);

/** Postgres text and jsonb cannot hold U+0000; it is refused on both adapters alike. */
const NUL_REFUSED = 'contains a NUL character (U+0000), which a dataset cannot store';

/** Whether a parsed JSON value holds U+0000 in a string or a key. */
const hasNul = (value: unknown): boolean =>
  typeof value === 'string' ? value.includes('\0') : typeof value === 'object' && value !== null && Object.entries(value).some(([key, item]) => key.includes('\0') || hasNul(item));

const parseString = (text: string): unknown => {
  if (text === '') return null;
  if (text.includes('\0')) throw new ValueError(NUL_REFUSED);
  return text;
};

const parseJson = (text: string): unknown => {
  if (text === '') return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ValueError(`"${clip(text)}" is not JSON`);
  }
  // A raw NUL is not JSON; only the escape \u0000 can bring one in.
  if (text.includes('\\u0000') && hasNul(value)) throw new ValueError(NUL_REFUSED);
  return value;
};

const TEXT_PARSERS: Record<DataColumnType, (text: string) => unknown> = {
  string: parseString,
  integer: parseInteger,
  number: parseNumber,
  boolean: parseBoolean,
  date: parseDate,
  timestamp: parseTimestamp,
  json: parseJson,
};

/** The parser of CSV fields for a column type: an empty field is null; a value that does not fit throws ValueError. */
export function textParser(type: DataColumnType): (text: string) => unknown {
  return TEXT_PARSERS[type];
}

/** Parses a CSV field into the column's type; an empty field is null. */
export function parseText(type: DataColumnType, text: string): unknown {
  return TEXT_PARSERS[type](text);
}

/** Checks a JSON value against the column's type (JSON rows ingest); dates and timestamps come as strings. */
export function parseJsonValue(type: DataColumnType, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (type) {
    case 'string':
      if (typeof value !== 'string') throw new ValueError(`expected a string, got ${typeof value}`);
      return value;
    case 'integer':
      if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw new ValueError(`expected an integer, got ${JSON.stringify(value)}`);
      return value;
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value)) throw new ValueError(`expected a number, got ${JSON.stringify(value)}`);
      return value;
    case 'boolean':
      if (typeof value !== 'boolean') throw new ValueError(`expected a boolean, got ${JSON.stringify(value)}`);
      return value;
    case 'date':
    case 'timestamp':
      if (typeof value !== 'string') throw new ValueError(`expected a ${type} string, got ${JSON.stringify(value)}`);
      return parseText(type, value);
    case 'json':
      return value;
  }
}

/** Candidate types from the most to the least specific; `string` accepts everything. */
const INFERENCE_ORDER: DataColumnType[] = ['integer', 'number', 'boolean', 'date', 'timestamp', 'string'];

/** The most specific type every non-empty sample value parses as (all empty: string). */
export function inferType(samples: string[]): DataColumnType {
  const present = samples.filter((s) => s !== '');
  if (present.length === 0) return 'string';
  // Nothing fits a value no column can store (a NUL): string, whose parser then names it.
  return INFERENCE_ORDER.find((type) => present.every((text) => fits(type, text))) ?? 'string';
}

function fits(type: DataColumnType, text: string): boolean {
  // "1"/"0" parse as booleans too; a column of digits is an integer column.
  if (type === 'boolean' && INTEGER.test(text)) return false;
  try {
    parseText(type, text);
    return true;
  } catch {
    return false;
  }
}

const clip = (text: string) => (text.length > 40 ? `${text.slice(0, 40)}…` : text);
