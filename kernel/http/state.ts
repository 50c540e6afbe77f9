import type { Context } from 'koa';
import type { Logger } from 'pino';
import type { Principal } from '../route.ts';
import { rawHeader } from './request-headers.ts';

/** Everything the kernel attaches to a request, in Koa's `ctx.state`. */
export interface RequestState {
  requestId: string;
  log: Logger;
  /** Client address (the first X-Forwarded-For hop when TRUST_PROXY is on). */
  ip: string;
  /**
   * The request's method and path (without the query), read once: through Koa's context each read is
   * a delegated getter and a URL parse check, and every middleware before the route reads them.
   */
  readonly method: string;
  readonly path: string;
  /** The query string, without its `?` ('' when there is none). */
  readonly querystring: string;
  /** A request header by its lower-case name (see `rawHeader`). */
  header(name: string): string | undefined;
  principal?: Principal;
  orgId?: number;
  /** What the request log names instead of the path, when the path is a secret. */
  loggedPath?: string;
}

const SLASH = 0x2f;

/** The state of one request; its client address is found when first asked (most answers never need it). */
export class KernelRequestState implements RequestState {
  principal?: Principal;
  orgId?: number;
  loggedPath?: string;
  readonly method: string;
  readonly path: string;
  readonly querystring: string;
  private address: string | undefined;

  constructor(
    private readonly ctx: Context,
    readonly requestId: string,
    readonly log: Logger,
  ) {
    this.method = ctx.req.method!;
    // Split off the request target as Koa's parser would, without building its URL object; a target
    // of another form (absolute, as to a proxy, or holding a fragment) is left to that parser.
    const target = ctx.req.url!;
    const query = target.indexOf('?');
    if (target.charCodeAt(0) === SLASH && !target.includes('#')) {
      this.path = query < 0 ? target : target.slice(0, query);
      this.querystring = query < 0 ? '' : target.slice(query + 1);
    } else {
      this.path = ctx.request.path;
      this.querystring = ctx.request.querystring;
    }
  }

  get ip(): string {
    return (this.address ??= this.ctx.ip);
  }

  header(name: string): string | undefined {
    return rawHeader(this.ctx.req.rawHeaders, name);
  }
}
