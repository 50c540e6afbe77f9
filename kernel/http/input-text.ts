import { problems, type FieldError } from '../problem.ts';

/** Levels of nesting a JSON body may have: far more than any field of this API needs, and few enough for every recursive reader (JSON.stringify, the drivers' JSON encoders) not to overflow its stack. */
export const MAX_BODY_DEPTH = 100;

const NUL = 'must not contain the NUL character (U+0000)';
const LONE_SURROGATE = 'must be well-formed Unicode: a lone surrogate (such as \\ud800) is not accepted';
const TOO_DEEP = `nests deeper than ${MAX_BODY_DEPTH} levels`;

/**
 * Input no field of this API accepts is a 400 naming where it is, before any handler:
 * - U+0000 in a path parameter, a query value or a JSON body string or key: Postgres text cannot hold it;
 * - a lone surrogate in a JSON body string or key (JSON may spell `\ud800`; Postgres refuses it as
 *   JSON and SQLite would store U+FFFD in its place, so what was sent would not be what is kept);
 * - a JSON body nested deeper than `MAX_BODY_DEPTH`;
 * - a query parameter named `__proto__` (a body's is refused by the JSON parser).
 * A body is walked only when there is one; the query is parsed only when its text holds an encoded
 * NUL (URLSearchParams decodes `%00` and nothing else into U+0000, and invalid UTF-8 into U+FFFD)
 * or may spell `__proto__`.
 */
export function refuseUnfitInput(params: Record<string, unknown> | undefined, querystring: string, query: () => object, body: unknown): void {
  const errors: FieldError[] = [];
  if (params) for (const key in params) if (typeof params[key] === 'string' && params[key].includes('\0')) errors.push(fieldError(['params', key], NUL));
  if (querystring.includes('%00')) findUnfit(query(), 'query', errors);
  // A schema's parse would drop it (assigning `__proto__` sets a prototype): refused, as in a body.
  if (MAY_NAME_PROTO.test(querystring) && Object.hasOwn(query(), '__proto__')) errors.push({ path: 'query.__proto__', message: 'a parameter named __proto__ is not accepted' });
  if (!fitsJson(body)) findUnfit(body, 'body', errors);
  if (errors.length) throw unfit(errors);
}

/**
 * The body check of `refuseUnfitInput` for JSON a plugin reads itself (a streamed body, a file of a
 * form): a 400 naming each unfit value under `at`.
 */
export function refuseUnfitJson(value: unknown, at: string): void {
  if (fitsJson(value)) return;
  const errors: FieldError[] = [];
  findUnfit(value, at, errors);
  throw unfit(errors);
}

const unfit = (errors: FieldError[]) => problems.badRequest(`the request holds input no field accepts: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`, errors);

const fitsJson = (value: unknown) => (typeof value === 'object' && value !== null ? fits(value) : typeof value !== 'string' || textFault(value) === null);

/** Whether a query string may name `__proto__`: literally, or with one of its letters percent-encoded. */
const MAY_NAME_PROTO = /proto|%(5f|70|72|6f|74)/i;

/** What is wrong with a text, or null. */
const textFault = (text: string): string | null => (text.includes('\0') ? NUL : text.isWellFormed() ? null : LONE_SURROGATE);

/**
 * Whether every string and key of a parsed JSON value is fit and it nests at most `MAX_BODY_DEPTH`
 * levels. Iterative, with the depths in a second stack: nothing is allocated per value, since every
 * JSON request pays for this walk.
 */
function fits(root: object): boolean {
  const values: unknown[] = [root];
  const depths: number[] = [1];
  while (values.length) {
    const value = values.pop();
    const depth = depths.pop()!;
    if (typeof value === 'string') {
      if (textFault(value) !== null) return false;
    } else if (typeof value === 'object' && value !== null) {
      if (depth > MAX_BODY_DEPTH) return false;
      if (Array.isArray(value)) {
        for (const item of value) (values.push(item), depths.push(depth + 1));
      } else {
        for (const key in value) {
          if (textFault(key) !== null) return false;
          values.push((value as Record<string, unknown>)[key]);
          depths.push(depth + 1);
        }
      }
    }
  }
  return true;
}

/** A step of the walk of `findUnfit`: the path is a chain of parents, made into text only for a fault. */
interface Step {
  value: unknown;
  key: string;
  parent: Step | null;
  depth: number;
}

/** The paths of the unfit strings, keys and too-deep values (walked once `fits` found one), at most `MAX_FIELD_ERRORS` of them. */
function findUnfit(root: unknown, at: string, errors: FieldError[]): void {
  const pending: Step[] = [{ value: root, key: at, parent: null, depth: 1 }];
  while (pending.length && errors.length < MAX_FIELD_ERRORS) {
    const step = pending.pop()!;
    const { value, depth } = step;
    if (typeof value === 'string') {
      const fault = textFault(value);
      if (fault !== null) errors.push(fieldError(pathOf(step), fault));
    } else if (typeof value === 'object' && value !== null) {
      if (depth > MAX_BODY_DEPTH) {
        errors.push(fieldError(pathOf(step), TOO_DEEP));
      } else if (Array.isArray(value)) {
        value.forEach((item, i) => pending.push({ value: item, key: String(i), parent: step, depth: depth + 1 }));
      } else {
        for (const key in value) {
          const fault = textFault(key);
          const child: Step = { value: (value as Record<string, unknown>)[key], key, parent: step, depth: depth + 1 };
          if (fault !== null) errors.push(fieldError(pathOf(child), fault));
          pending.push(child);
        }
      }
    }
  }
}

/** Fields an input refusal names at most (a body may hold thousands of faults; the first ones tell what is wrong). */
const MAX_FIELD_ERRORS = 100;

function pathOf(step: Step): string[] {
  const path: string[] = [];
  for (let at: Step | null = step; at; at = at.parent) path.push(at.key);
  return path.reverse();
}

/** A field error whose path shows the NUL and lone surrogates it names as escapes (the answer itself must be well-formed). */
function fieldError(path: string[], message: string): FieldError {
  return { path: path.map(escapeUnfit).join('.'), message };
}

const escapeUnfit = (part: string) => part.replaceAll('\0', '\\u0000').replace(/\p{Surrogate}/gu, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
