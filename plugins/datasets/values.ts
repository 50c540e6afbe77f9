import type { DataColumnType } from '../../storage/index.ts';

/** A value that does not fit its column: the caller adds where (line, row index) it was. */
export class ValueError extends Error {}

const INTEGER = /^[+-]?\d+$/;
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/;
const TRUE = new Set(['true', 't', 'yes', 'y', '1']);
const FALSE = new Set(['false', 'f', 'no', 'n', '0']);

function validDate(text: string): boolean {
  const date = new Date(`${text}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === text;
}

/** Parses a CSV field into the column's type; an empty field is null. */
export function parseText(type: DataColumnType, text: string): unknown {
  if (text === '') return null;
  switch (type) {
    case 'string':
      return text;
    case 'integer': {
      const value = Number(text);
      if (!INTEGER.test(text) || !Number.isSafeInteger(value)) throw new ValueError(`"${clip(text)}" is not an integer`);
      return value;
    }
    case 'number': {
      const value = Number(text);
      if (!NUMBER.test(text) || !Number.isFinite(value)) throw new ValueError(`"${clip(text)}" is not a number`);
      return value;
    }
    case 'boolean': {
      const lower = text.toLowerCase();
      if (TRUE.has(lower)) return true;
      if (FALSE.has(lower)) return false;
      throw new ValueError(`"${clip(text)}" is not a boolean (true/false, yes/no, 1/0)`);
    }
    case 'date':
      if (!DATE.test(text) || !validDate(text)) throw new ValueError(`"${clip(text)}" is not a date (YYYY-MM-DD)`);
      return text;
    case 'timestamp': {
      const time = Date.parse(text.replace(' ', 'T'));
      if (!TIMESTAMP.test(text) || Number.isNaN(time)) throw new ValueError(`"${clip(text)}" is not an ISO-8601 timestamp`);
      return new Date(time).toISOString();
    }
    case 'json':
      try {
        return JSON.parse(text);
      } catch {
        throw new ValueError(`"${clip(text)}" is not JSON`);
      }
  }
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
  return INFERENCE_ORDER.find((type) => present.every((text) => fits(type, text)))!;
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
