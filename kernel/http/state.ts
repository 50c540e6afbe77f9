import type { Logger } from 'pino';
import type { Principal } from '../route.ts';

/** Everything the kernel attaches to a request, in Koa's `ctx.state`. */
export interface RequestState {
  requestId: string;
  log: Logger;
  /** Client address (the first X-Forwarded-For hop when TRUST_PROXY is on). */
  ip: string;
  principal?: Principal;
  orgId?: number;
}
