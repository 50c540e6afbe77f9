import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { ZodType } from 'zod';
import type { Storage } from '../../storage/index.ts';
import { actingUserId, type Principal, type StoredActor } from '../auth/principal.ts';
import type { ServiceLifecycle } from '../registry/lifecycle.ts';
import { PeriodicTimer } from './periodic.ts';
import type { WorkContext, WorkRunner } from './work-runner.ts';
import { WorkStore, type WorkFilter, type WorkItem } from './work-store.ts';

export interface HandlerOptions<P> {
  /** Checks each item's payload before the handler sees it; an item whose payload fails ends `failed`. */
  payload?: ZodType<P>;
  /** How long one attempt may run before its signal aborts and it ends `failed` with reason `timeout`. */
  timeoutMs?: number;
  /**
   * Attempts before an item ends `failed` (default 1). An attempt that throws, or whose instance
   * died (its lease expired), is retried while attempts remain; a timeout or a cancel is final.
   * Set it above 1 only for work that may safely run again after a partial attempt.
   */
  maxAttempts?: number;
}

export interface EnqueueRequest {
  /** The organization the work belongs to (its per-organization limit); null for platform work. */
  orgId: number | null;
  payload?: unknown;
  /**
   * Who asked for the work: it runs as a background run acting for that user (the user a run
   * acts for, for work a run asks for; a stored actor's user), with their capabilities when it
   * starts, narrowed to a scoped token's scopes. Absent (or a data API key): platform work, with
   * no principal.
   */
  onBehalfOf?: Principal | StoredActor | null;
  /** Not before this time. */
  runAfter?: Date;
  /** At most one item is ever enqueued with a key: another enqueue with it answers null. */
  dedupeKey?: string;
}

/**
 * Background work as one plugin sees it: its own kinds of work (`<plugin id>.<name>`), enqueued
 * (inside the caller's transaction when given one, so the work exists exactly when the change
 * that asked for it does), run by the kernel's runner on whichever instance claims it, read and
 * cancelled by id. Handlers and periodic timers are removed when the plugin version unloads; its
 * running items are drained like its requests.
 */
export interface BackgroundWork {
  handle<P>(name: string, run: (context: WorkContext<P>) => Promise<unknown>, options?: HandlerOptions<P>): void;
  enqueue(name: string, request: EnqueueRequest, db?: Kysely<any>): Promise<WorkItem | null>;
  /** Enqueues `name` at each time the cron expression names, once across every instance. */
  every(name: string, schedule: { cron: string; timezone?: string; payload?: unknown }): void;
  /** An item of this plugin's kinds; with `orgId`, only if it belongs to that organization. */
  get(id: number, orgId?: number): Promise<WorkItem | undefined>;
  list(filter: Omit<WorkFilter, 'kind'> & { name?: string }): Promise<WorkItem[]>;
  /** Cancels a queued or running item of this plugin's kinds (answers it as it now is). */
  cancel(id: number, orgId?: number): Promise<WorkItem | undefined>;
}

export interface BackgroundWorkDeps {
  storage: Storage;
  runner: WorkRunner;
  logger: Logger;
  defaultTimeoutMs: number;
  drainTimeoutMs: number;
}

const NAME = /^[a-z][a-z0-9_-]*$/;

/** The plugin-scoped view of background work; handlers and timers start when the plugin version activates. */
export function backgroundWorkFor(pluginId: string, deps: BackgroundWorkDeps, lifecycle: ServiceLifecycle): BackgroundWork {
  const store = new WorkStore(deps.storage);
  const options = new Map<string, HandlerOptions<unknown>>();
  const kindOf = (name: string) => {
    if (!NAME.test(name)) throw new TypeError(`work name "${name}" must be lower-case letters, digits, - or _`);
    return `${pluginId}.${name}`;
  };
  const own = (item: WorkItem | undefined) => (item && item.kind.startsWith(`${pluginId}.`) ? item : undefined);
  const enqueue = (name: string, request: EnqueueRequest, db?: Kysely<any>) => {
    const kind = kindOf(name);
    const handler = options.get(kind);
    if (!handler) throw new TypeError(`plugin ${pluginId} enqueues "${name}" but registers no handler for it`);
    return store.enqueue(
      {
        kind,
        orgId: request.orgId,
        payload: request.payload ?? null,
        onBehalfOf: request.onBehalfOf ? actingUserId(request.onBehalfOf) : null,
        scopes: scopesOf(request.onBehalfOf),
        maxAttempts: handler.maxAttempts ?? 1,
        timeoutMs: handler.timeoutMs ?? deps.defaultTimeoutMs,
        runAfter: request.runAfter?.toISOString(),
        dedupeKey: request.dedupeKey,
      },
      db,
    );
  };

  return {
    handle(name, run, handlerOptions = {}) {
      const kind = kindOf(name);
      options.set(kind, handlerOptions as HandlerOptions<unknown>);
      lifecycle.onActivate(() =>
        deps.runner.register(
          kind,
          {
            pluginId,
            run: (context) => {
              const checked = handlerOptions.payload?.safeParse(context.payload);
              if (checked && !checked.success) throw new Error(`the payload of ${kind} #${context.item.id} is not what its handler expects: ${checked.error.issues[0]?.message}`);
              return run(checked ? { ...context, payload: checked.data } : (context as WorkContext<never>));
            },
          },
          deps.drainTimeoutMs,
        ),
      );
    },
    enqueue,
    every(name, schedule) {
      const kind = kindOf(name);
      const timer = new PeriodicTimer(
        schedule.cron,
        schedule.timezone,
        async (at) => void (await enqueue(name, { orgId: null, payload: schedule.payload ?? null, dedupeKey: `${kind}@${at.toISOString()}` })),
        deps.logger,
      );
      lifecycle.onActivate(() => {
        timer.start();
        return () => timer.stop();
      });
    },
    get: async (id, orgId) => own(await store.get(id, orgId)),
    list: ({ name, ...filter }) => store.list({ ...filter, kind: name === undefined ? undefined : kindOf(name), kindPrefix: `${pluginId}.` }),
    async cancel(id, orgId) {
      if (!own(await store.get(id, orgId))) return undefined;
      return store.cancel(id, orgId);
    },
  };
}

/** What a run asked for by `actor` is narrowed to: a scoped token's scopes, a run's own capabilities. */
function scopesOf(actor: Principal | StoredActor | null | undefined): string[] | null {
  if (!actor) return null;
  if (!('kind' in actor)) return actor.scopes ? [...actor.scopes] : null;
  if (actor.kind === 'user') return actor.scopes ? [...actor.scopes] : null;
  if (actor.kind === 'run') return [...actor.capabilities];
  return null;
}
