import type { Logger } from 'pino';
import type { Principal } from '../route.ts';

/** Everything the kernel attaches to a request, in Koa's `ctx.state`. */
export interface RequestState {
  requestId: string;
  log: Logger;
  principal?: Principal;
  orgId?: number;
}
