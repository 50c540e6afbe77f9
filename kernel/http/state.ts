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
  /** A request header by its lower-case name (see `rawHeader`). */
  header(name: string): string | undefined;
  principal?: Principal;
  orgId?: number;
  /** What the request log names instead of the path, when the path is a secret. */
  loggedPath?: string;
}

/** The state of one request; its client address is found when first asked (most answers never need it). */
export class KernelRequestState implements RequestState {
  principal?: Principal;
  orgId?: number;
  loggedPath?: string;
  readonly method: string;
  readonly path: string;
  private address: string | undefined;

  constructor(
    private readonly ctx: Context,
    readonly requestId: string,
    readonly log: Logger,
  ) {
    this.method = ctx.req.method!;
    this.path = ctx.request.path;
  }

  get ip(): string {
    return (this.address ??= this.ctx.ip);
  }

  header(name: string): string | undefined {
    return rawHeader(this.ctx.req.rawHeaders, name);
  }
}
