import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import type { FieldError } from './problem.ts';

/** Where parameters fail a schema, as field errors under `location` (`body.params.field`); empty when valid. */
export type ParamsCheck = (params: unknown, location: string) => FieldError[];

/**
 * One instance for every contribution's schema (making an instance compiles the meta-schemas: tens
 * of ms each, which start-up paid per type): a compiled schema is not kept under its `$id`, so
 * schemas of different plugins may reuse one without clashing. `type: [a, b]` is plain JSON Schema
 * (an agent tool's "a name or an id"): allowed, rather than warned about on stderr.
 */
const ajv = new Ajv2020({ allErrors: true, addUsedSchema: false, allowUnionTypes: true });
// `format` is checked (date, date-time, email, uri…), not refused as an unknown keyword.
ajvFormats.default(ajv); // a CommonJS module: its plugin is its `default` as well as itself

/**
 * Compiles the JSON Schema of a contribution's parameters (a recipe type's, a step type's, a card type's config) with
 * ajv, draft 2020-12, all errors. `what` names the contribution in the error an invalid schema throws.
 */
export function compileParams(what: string, schema: Record<string, unknown>): ParamsCheck {
  let validate: ReturnType<Ajv2020['compile']>;
  try {
    validate = ajv.compile(schema);
  } catch (err) {
    throw new Error(`${what}: params is not a valid JSON Schema: ${(err as Error).message}`);
  }
  return (params, location) => (validate(params) ? [] : (validate.errors ?? []).map((error) => fieldError(error, location)));
}

/** An ajv error as a field error: its instance path (a missing or extra property named) under `location`. */
function fieldError(error: ErrorObject, location: string): FieldError {
  const segments = error.instancePath.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const named = error.params.missingProperty ?? error.params.additionalProperty;
  if (typeof named === 'string') segments.push(named);
  return { path: [location, ...segments].join('.'), message: error.message ?? 'is invalid' };
}

/**
 * Checks `value` against a schema made for this one check (an API Service endpoint's request body,
 * described anew each call): compiled, used, then dropped from ajv's cache, which would otherwise
 * keep every such schema for the life of the process.
 */
export function checkOnce(schema: Record<string, unknown>, value: unknown, location: string): FieldError[] {
  const validate = ajv.compile(schema);
  try {
    return validate(value) ? [] : (validate.errors ?? []).map((error) => fieldError(error, location));
  } finally {
    ajv.removeSchema(schema);
  }
}
