import type { Disposable } from '../plugin-api.ts';

/**
 * How a kernel service scoped to one plugin version ties what the plugin registers through it to
 * that version's life. `onActivate`: what starts consuming shared work (a work handler, a periodic
 * timer, an event subscriber) starts only once the version serves — when its generation is
 * committed, with every plugin it may need (the contributors to its extension points) loaded —
 * never while a reload is still building the generation. What `start` answers is undone at unload.
 */
export interface ServiceLifecycle {
  onDispose(dispose: Disposable): void;
  onActivate(start: () => Disposable | void): void;
}

/** A lifecycle outside any plugin version (the kernel's own work): active at once, undone by `disposables`. */
export function activeLifecycle(disposables: Disposable[]): ServiceLifecycle {
  return {
    onDispose: (dispose) => void disposables.push(dispose),
    onActivate: (start) => {
      const undo = start();
      if (undo) disposables.push(undo);
    },
  };
}
