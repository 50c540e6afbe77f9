import { definePlugin, kernelServices, z } from '../../kernel/plugin-api.ts';
import { Deliverer, DELIVER } from './deliverer.ts';
import { SOURCE_EVENT_TYPES, webhookEventId, webhookEventsOf } from './event-types.ts';
import { webhooksMigrations } from './migrations.ts';
import { webhookRoutes } from './routes.ts';
import { WebhookStore } from './webhook-store.ts';

/**
 * The `webhooks` router: an organization's subscriptions of URLs to platform events, each event
 * delivered as a signed POST, retried with backoff for 24 hours, every attempt in a delivery log.
 */
export default definePlugin({
  deps: {
    storage: kernelServices.storage,
    work: kernelServices.work,
    events: kernelServices.events,
    vault: kernelServices.vault,
    outbound: kernelServices.outbound,
    enablement: kernelServices.pluginEnablement,
    config: kernelServices.config,
  },
  migrations: webhooksMigrations,
  init: ({ storage, work, events, vault, outbound, enablement, config }, ctx) => {
    const store = new WebhookStore(storage);
    const deliverer = new Deliverer({ storage, store, work, vault, outbound, retryBaseMs: config.WEBHOOK_RETRY_BASE_MS });
    // Leased: an instance that dies mid-attempt has it taken over (the receiver may see it twice).
    work.handle<{ delivery_id: number }>(DELIVER, ({ payload }) => deliverer.attempt(payload.delivery_id), { payload: z.object({ delivery_id: z.number().int() }), maxAttempts: 5, timeoutMs: 60_000 });

    // Each event becomes one pending delivery per subscription of its organization, with its first
    // attempt's work, in one transaction: handled again after a crash, it adds nothing twice.
    events.subscribe('fanout', {
      types: SOURCE_EVENT_TYPES,
      handle: async (event) => {
        if (event.org_id === null || !(await enablement.isEnabled(ctx.pluginId, event.org_id))) return;
        const orgId = event.org_id;
        const types = webhookEventsOf(event);
        if (!types.length) return;
        const subscribers = await store.subscribers(orgId, types);
        if (!subscribers.length) return;
        await storage.transaction(async (trx) => {
          for (const subscriber of subscribers) {
            const eventId = webhookEventId(event, subscriber.event_type);
            const body = JSON.stringify({ id: eventId, type: subscriber.event_type, created_at: event.created_at, org_id: orgId, data: event.payload });
            const deliveryId = await store.addDelivery(trx, orgId, { webhook_id: subscriber.id, event_id: eventId, event_type: subscriber.event_type, body, event_at: event.created_at });
            if (deliveryId !== null) await deliverer.schedule(trx, orgId, deliveryId);
          }
        });
      },
    });
    return { routes: webhookRoutes({ storage, store, deliverer, vault, outbound }) };
  },
});
