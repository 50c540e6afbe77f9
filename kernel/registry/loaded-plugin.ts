import type { Logger } from 'pino';
import type { Disposable } from '../plugin-api.ts';
import type { RouteDefinition } from '../route.ts';
import type { PluginManifest } from './manifest.ts';

/**
 * One running version of a plugin. Requests it took are counted so that, when a newer version
 * replaces it, it is disposed only after they finished.
 */
export class LoadedPlugin {
  readonly loadedAt = new Date().toISOString();
  private inflight = 0;
  private idleWaiters: (() => void)[] = [];
  private readonly disposables: Disposable[] = [];
  private readonly activations: (() => Disposable | void)[] = [];

  constructor(
    readonly manifest: PluginManifest,
    readonly file: string,
    readonly dir: string,
    readonly routes: RouteDefinition<any>[],
    private readonly log: Logger,
  ) {}

  get id() {
    return this.manifest.id;
  }

  addDisposable(dispose: Disposable) {
    this.disposables.push(dispose);
  }

  /** Something to start once this version serves (see ServiceLifecycle.onActivate). */
  addActivation(start: () => Disposable | void) {
    this.activations.push(start);
  }

  /** This version now serves: its work handlers, timers and subscribers start (once). */
  activate(): void {
    for (const start of this.activations.splice(0)) {
      const undo = start();
      if (undo) this.disposables.push(undo);
    }
  }

  /** A request of this version begins: it counts as in flight until `leave()`. */
  enter(): void {
    this.inflight += 1;
  }

  /** A request of this version has settled (call it in a `finally`). */
  leave(): void {
    this.inflight -= 1;
    if (this.inflight === 0 && this.idleWaiters.length > 0) this.idleWaiters.splice(0).forEach((wake) => wake());
  }

  /** Waits for in-flight requests (at most `timeoutMs`), then runs every disposable, newest first. */
  async drainAndDispose(timeoutMs: number): Promise<void> {
    if (this.inflight > 0) {
      let timer: NodeJS.Timeout | undefined;
      const drained = new Promise<void>((resolve) => this.idleWaiters.push(resolve));
      const timedOut = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
      await Promise.race([drained, timedOut]);
      clearTimeout(timer);
      if (this.inflight > 0) this.log.warn({ plugin: this.id, inflight: this.inflight }, 'drain timed out; disposing with requests in flight');
    }
    await this.dispose();
  }

  /** Runs every disposable, newest first; one failing does not stop the others. */
  async dispose(): Promise<void> {
    for (const dispose of this.disposables.splice(0).reverse()) {
      try {
        await dispose();
      } catch (err) {
        this.log.error({ plugin: this.id, err }, 'plugin dispose step failed');
      }
    }
  }
}
