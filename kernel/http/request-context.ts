import type { Context, Middleware } from 'koa';
import type { Logger } from 'pino';
import { HttpProblem, isHttpProblem, problemBody } from '../problem.ts';
import { KernelResponse } from './kernel-response.ts';
import { prototypeKeyProblem } from './prototype-keys.ts';
import { RequestIds } from './request-ids.ts';
import { rawHeader } from './request-headers.ts';
import { KernelRequestState, type RequestState } from './state.ts';

const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The outermost middleware: a request id on every request and answer (the response writes it, with
 * the security headers: kernel-response.ts), one log line per request, and every error turned into
 * RFC 9457 problem details. A 500 carries the request id, never a stack;
 * an error that says the database connection was lost (`connectionLost`, the storage's own test)
 * is a 503 the client may retry.
 */
export function requestContext(logger: Logger, connectionLost: (err: unknown) => boolean = () => false): Middleware<RequestState> {
  // Decided once: a silent logger needs no child per request, and no request line is built for a level that drops it.
  const silent = logger.levelVal === Infinity;
  const logsRequests = logger.isLevelEnabled('info');
  const ids = new RequestIds();
  return (ctx, next) => {
    const res = ctx.res;
    // The response answers the request id and the security headers: an app served otherwise would answer neither.
    if (!(res instanceof KernelResponse)) throw new Error('the kernel app is served by createKernelServer (app.ts), whose responses answer the request id and the security headers');
    const given = rawHeader(ctx.req.rawHeaders, 'x-request-id');
    const requestId = given !== undefined && CLIENT_REQUEST_ID.test(given) ? given : ids.next();
    const log = silent ? logger : logger.child({ request_id: requestId });
    ctx.state = new KernelRequestState(ctx, requestId, log);
    res.requestId = requestId;
    const started = logsRequests ? performance.now() : 0;
    const answered = next().catch((err: unknown) => answerProblem(ctx, err, log, requestId, connectionLost));
    if (!logsRequests) return answered;
    return answered.then(() => log.info({ method: ctx.state.method, path: ctx.state.loggedPath ?? ctx.state.path, status: ctx.status, ms: Math.round(performance.now() - started) }, 'request'));
  };
}

/** Answers an error as problem details; anything but a deliberate problem is logged as a bug. */
function answerProblem(ctx: Context, err: unknown, log: Logger, requestId: string, connectionLost: (err: unknown) => boolean) {
  const lost = !isHttpProblem(err) && connectionLost(err);
  const problem = lost ? DATABASE_CONNECTION_LOST : toProblem(err);
  if (lost) log.warn({ err }, 'database connection lost');
  else if (problem.status >= 500 && !isHttpProblem(err)) log.error({ err }, 'unhandled error');
  ctx.status = problem.status;
  ctx.type = 'application/problem+json';
  ctx.body = problemBody(problem, requestId);
  for (const [name, value] of Object.entries(problem.options.headers ?? {})) ctx.set(name, value);
}

const DATABASE_CONNECTION_LOST = new HttpProblem(503, 'the connection to the database was lost while answering this request; try again', {
  headers: { 'Retry-After': '1' },
});

/** Errors from Koa and its body parser carry a status (`http-errors`); anything else is a bug: 500. */
function toProblem(err: unknown): HttpProblem {
  if (isHttpProblem(err)) return err;
  const status = (err as { status?: unknown; statusCode?: unknown })?.status ?? (err as { statusCode?: unknown })?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const message = (err as Error).message;
    if (status === 413) return new HttpProblem(413, `request body is larger than the limit: ${message}`);
    const prototypeKey = prototypeKeyProblem(err);
    if (prototypeKey) return prototypeKey;
    if (status === 400 && /JSON|token|Unexpected/i.test(message)) return invalidJson(message);
    return new HttpProblem(status, message);
  }
  return new HttpProblem(500, 'internal error; quote the request id when reporting it');
}

/**
 * The parser's message is not passed on: it may quote the start of the body (Node 20: `Unexpected
 * token 'p', "password=S"... is not valid JSON`), which can be a secret. Its position is kept.
 */
function invalidJson(parserMessage: string): HttpProblem {
  const position = /at position (\d+)/.exec(parserMessage)?.[1];
  const where = position === undefined ? '' : ` at position ${position}`;
  return new HttpProblem(400, `request body is not valid JSON${where}`, { errors: [{ path: 'body', message: `not valid JSON${where}` }] });
}
