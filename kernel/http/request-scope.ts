import { AsyncLocalStorage } from 'node:async_hooks';
import type { RequestState } from './state.ts';

/**
 * The current request's state, reachable from services (audit) without threading the Koa context
 * through every call. The store is the request's `ctx.state` itself, so it sees the principal and
 * organization once the pipeline has resolved them.
 */
export class RequestScope {
  private readonly storage = new AsyncLocalStorage<RequestState>();

  run<T>(state: RequestState, work: () => Promise<T>): Promise<T> {
    return this.storage.run(state, work);
  }

  current(): RequestState | undefined {
    return this.storage.getStore();
  }
}
