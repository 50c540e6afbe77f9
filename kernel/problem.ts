import { STATUS_CODES } from 'node:http';

/** One failing field of a request: where it was and why it failed. */
export interface FieldError {
  /** Location and path, e.g. `body.name`, `query.limit`, `params.id`, `headers.x-org-id`. */
  path: string;
  message: string;
}

/**
 * Validation issues (zod's shape) as field errors under a location such as `body` or `query`. A
 * field a strict object does not take is named itself (`body.temperature`: not a field here), not
 * the object holding it, so the caller sees which one to leave out.
 */
export function fieldErrorsOf(issues: readonly { path: readonly PropertyKey[]; message: string; code?: string; keys?: readonly string[] }[], location: string): FieldError[] {
  return issues.flatMap((issue) => {
    const at = [location, ...issue.path.map(String)];
    if (issue.code === 'unrecognized_keys' && issue.keys?.length) return issue.keys.map((key) => ({ path: [...at, key].join('.'), message: 'is not a field here' }));
    return [{ path: at.join('.'), message: issue.message }];
  });
}

const PROBLEM_BRAND = Symbol.for('platform.http-problem');

/**
 * An RFC 9457 problem an HTTP answer is made from. Thrown by the kernel and by plugins; branded
 * rather than checked with `instanceof` so a problem from a hot-reloaded module is still known.
 */
export class HttpProblem extends Error {
  readonly [PROBLEM_BRAND] = true;
  constructor(
    readonly status: number,
    readonly detail: string,
    readonly options: { title?: string; type?: string; errors?: FieldError[]; headers?: Record<string, string>; code?: string } = {},
  ) {
    super(detail);
  }
  get title() {
    return this.options.title ?? STATUS_CODES[this.status] ?? 'Error';
  }
}

export function isHttpProblem(value: unknown): value is HttpProblem {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[PROBLEM_BRAND] === true;
}

/**
 * `err` with its fields renamed by `rename`, for a check run on behalf of a caller who put them
 * elsewhere (an endpoint's `body.region` is a tool's `arguments.input.region`): in its `errors`, and
 * where its detail names one as checks word it (`<path>: why`, several joined by `; `). Anything
 * else, and a problem none of whose fields is renamed, is answered as it is.
 */
export function withFieldsRenamed(err: unknown, rename: (path: string) => string): unknown {
  if (!isHttpProblem(err) || !err.options.errors?.length) return err;
  const renamed = new Map(err.options.errors.map((e) => [e.path, rename(e.path)]));
  if ([...renamed].every(([from, to]) => from === to)) return err;
  const detail = err.detail
    .split('; ')
    .map((part) => {
      const path = part.slice(0, part.indexOf(': '));
      return renamed.has(path) ? renamed.get(path) + part.slice(path.length) : part;
    })
    .join('; ');
  return new HttpProblem(err.status, detail, { ...err.options, errors: err.options.errors.map((e) => ({ ...e, path: renamed.get(e.path)! })) });
}

export const problems = {
  badRequest: (detail: string, errors?: FieldError[]) => new HttpProblem(400, detail, { errors }),
  /** A 400 whose detail lists every field error (`body.params.x: why; …`), for checks that gather them all before refusing. */
  invalidFields: (errors: FieldError[]) => new HttpProblem(400, errors.map((e) => `${e.path}: ${e.message}`).join('; '), { errors }),
  unauthorized: (detail: string) => new HttpProblem(401, detail, { headers: { 'WWW-Authenticate': 'Bearer' } }),
  forbidden: (detail: string) => new HttpProblem(403, detail),
  notFound: (detail: string) => new HttpProblem(404, detail),
  conflict: (detail: string) => new HttpProblem(409, detail),
  unprocessable: (detail: string, errors?: FieldError[]) => new HttpProblem(422, detail, { errors }),
  tooManyRequests: (detail: string, retryAfterSeconds: number) =>
    new HttpProblem(429, detail, { headers: { 'Retry-After': String(retryAfterSeconds) } }),
  notImplemented: (detail: string) => new HttpProblem(501, detail),
  unavailable: (detail: string, retryAfterSeconds?: number) =>
    new HttpProblem(503, detail, retryAfterSeconds ? { headers: { 'Retry-After': String(retryAfterSeconds) } } : {}),
};

/**
 * The JSON body of a problem answer. Bounded whatever the input was: a refusal names what was wrong
 * and where, yet its detail, each field's path and message (a key of a megabyte is a path part) and
 * the number of fields are cut at a size no useful answer reaches, so a huge input is not echoed.
 */
export function problemBody(problem: HttpProblem, requestId: string) {
  const { errors } = problem.options;
  const listed = errors && errors.length > MAX_FIELD_ERRORS ? ` (the first ${MAX_FIELD_ERRORS} of ${errors.length} fields are listed)` : '';
  return {
    type: problem.options.type ?? `about:blank`,
    title: problem.title,
    status: problem.status,
    detail: clipped(problem.detail, MAX_DETAIL_CHARS) + listed,
    request_id: requestId,
    ...(problem.options.code ? { code: problem.options.code } : {}),
    ...(errors ? { errors: errors.slice(0, MAX_FIELD_ERRORS).map((e) => ({ path: clipped(e.path, MAX_FIELD_CHARS), message: clipped(e.message, MAX_FIELD_CHARS) })) } : {}),
  };
}

const MAX_DETAIL_CHARS = 2000;
const MAX_FIELD_CHARS = 300;
const MAX_FIELD_ERRORS = 100;

/** `text` cut to `max` characters (never between the halves of a surrogate pair), saying how much was left out. */
function clipped(text: string, max: number): string {
  if (text.length <= max) return text;
  const end = /[\ud800-\udbff]/.test(text[max - 1]) ? max - 1 : max;
  return `${text.slice(0, end)}… (${text.length - end} more characters)`;
}
