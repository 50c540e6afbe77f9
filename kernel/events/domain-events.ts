import type { Kysely } from 'kysely';
import type { ServiceLifecycle } from '../registry/lifecycle.ts';
import type { EventDispatcher } from './event-dispatcher.ts';
import type { EventQuery, EventStore, NewEvent, PlatformEvent } from './event-store.ts';

export interface SubscribeOptions {
  /** Event types delivered to this subscriber. */
  types: string[];
  /** Where it starts the first time it subscribes (default `now`); afterwards it resumes where it stopped. */
  from?: 'now' | 'beginning';
  /** Runs once per event, in id order; an event is redelivered until this returns (see the README on retries). */
  handle(event: PlatformEvent): Promise<void>;
}

/**
 * Domain events as one plugin sees them: published in the transaction of the change they report,
 * delivered after commit at least once to every subscriber on one of the instances, readable
 * since an id. A subscription stops when the plugin version unloads; its position is kept, so the
 * next version (or the next start) resumes where it stopped.
 */
export interface DomainEvents {
  /** Publishes in `db`'s transaction when given one (else in a transaction of its own); answers the event id. */
  publish(event: NewEvent, db?: Kysely<any>): Promise<number>;
  /** Subscribes as `<plugin id>.<name>`. */
  subscribe(name: string, options: SubscribeOptions): void;
  read(query: EventQuery): Promise<PlatformEvent[]>;
}

const NAME = /^[a-z][a-z0-9_-]*$/;
const TYPE = /^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$/;

/** The plugin-scoped view of domain events; subscribers start when the plugin version activates. */
export function domainEventsFor(pluginId: string, store: EventStore, dispatcher: EventDispatcher, db: Kysely<any>, lifecycle: ServiceLifecycle): DomainEvents {
  return {
    publish(event, trx = db) {
      if (!TYPE.test(event.type)) throw new TypeError(`event type "${event.type}" must be dotted lower-case words such as datasets.deleted`);
      return store.publish(trx, pluginId, event);
    },
    subscribe(name, options) {
      if (!NAME.test(name)) throw new TypeError(`subscriber name "${name}" must be lower-case letters, digits, - or _`);
      lifecycle.onActivate(() => dispatcher.subscribe({ id: `${pluginId}.${name}`, types: options.types, from: options.from ?? 'now', handle: options.handle }));
    },
    read: (query) => store.read(query),
  };
}
