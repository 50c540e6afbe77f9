import crypto from 'node:crypto';
import { defineRoute, identitySchemas as s, kernelServices, OutboundFailedError, OutboundRefusedError, problems, reply, z, type ServiceType } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { Deliverer } from './deliverer.ts';
import { WEBHOOK_EVENT_TYPES } from './event-types.ts';
import type { WebhookStore } from './webhook-store.ts';

export interface WebhookRouteDeps {
  storage: Storage;
  store: WebhookStore;
  deliverer: Deliverer;
  vault: ServiceType<typeof kernelServices.vault>;
  outbound: ServiceType<typeof kernelServices.outbound>;
}

/** The event types a subscription may name (`ping` is sent by the ping route only). */
const SUBSCRIBABLE = Object.keys(WEBHOOK_EVENT_TYPES).filter((type) => type !== 'ping');

const base = { security: 'bearer', orgScoped: true, capability: 'webhooks.manage' } as const;
/** A pending delivery whose next attempt is this overdue lost its work (it may be redelivered). */
const STALE_PENDING_MS = 3_600_000;
const idParams = s.idParam('id');
const deliveryParams = idParams.extend(s.idParam('delivery_id').shape);

const eventType = z
  .string()
  .max(100)
  .refine((type) => SUBSCRIBABLE.includes(type), { message: `unknown event type (use ${SUBSCRIBABLE.join(', ')})` })
  .describe(SUBSCRIBABLE.map((type) => `\`${type}\`: ${WEBHOOK_EVENT_TYPES[type]}`).join('; '));
const targetUrl = z.string().max(2000).describe('Where deliveries are POSTed: http or https; a private, loopback or link-local address only when OUTBOUND_ALLOWED_HOSTS allows it');
const secret = z.string().min(16).max(256).describe('Signs every delivery (X-Service-Signature: sha256=<hex HMAC-SHA256 of the body>); never answered again');
const description = z.string().max(500).nullable().optional();

const webhookSchema = z
  .object({ id: z.number().int(), event_type: z.string(), target_url: z.string(), description: z.string().nullable(), created_by: z.number().int().nullable(), created_at: z.string(), updated_at: z.string() })
  .meta({ id: 'Webhook' });

const deliverySchema = z
  .object({
    id: z.number().int(),
    webhook_id: z.number().int(),
    event_id: z.string().describe('Stable across attempts and redeliveries of one event: de-duplicate by it'),
    event_type: z.string(),
    status: z.enum(['pending', 'succeeded', 'failed']),
    attempts: z.number().int(),
    last_status_code: z.number().int().nullable(),
    last_error: z.string().nullable(),
    next_attempt_at: z.string().nullable(),
    delivered_at: z.string().nullable(),
    deadline_at: z.string().describe('24 hours after the event (or the redelivery): no attempt after it'),
    created_at: z.string(),
  })
  .meta({ id: 'WebhookDelivery' });

export function webhookRoutes({ storage, store, deliverer, vault, outbound }: WebhookRouteDeps) {
  /** A target the outbound guard accepts, without credentials, or a 400 naming `body.target_url`. */
  async function checkedTarget(text: string): Promise<string> {
    const refuse = (message: string) => problems.badRequest(`body.target_url: ${message}`, [{ path: 'body.target_url', message }]);
    let url: URL;
    try {
      url = await outbound.checkTarget(text);
    } catch (err) {
      if (err instanceof OutboundRefusedError || err instanceof OutboundFailedError) throw refuse(err.message);
      throw err;
    }
    if (url.username || url.password) throw refuse('credentials in the URL are not allowed (sign with the secret instead)');
    return url.toString();
  }

  return [
    defineRoute({
      ...base,
      method: 'get',
      path: '/event-types',
      summary: 'Event types a webhook can subscribe to',
      description: 'Each with what it reports.',
      responses: { 200: { description: 'The event types', schema: z.object({ items: z.array(z.object({ type: z.string(), description: z.string() })) }) } },
      handler: () => ({ items: SUBSCRIBABLE.map((type) => ({ type, description: WEBHOOK_EVENT_TYPES[type] })) }),
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '',
      summary: 'Subscribe a URL to an event type',
      description:
        'From now on each event of that type in this organization is POSTed to `target_url` as `{id, type, created_at, org_id, data}` with the headers X-Service-Signature, X-Service-Event and X-Service-Delivery; any 2xx is success, anything else is retried (see GET …/deliveries). An unknown event type, or a target the outbound guard refuses, is a 400.',
      request: { body: z.object({ event_type: eventType, target_url: targetUrl, secret, description }).strict() },
      responses: { 201: { description: 'The subscription (never its secret)', schema: webhookSchema } },
      handler: async ({ body, orgId, principal, audit }) => {
        const target = await checkedTarget(body.target_url);
        const webhook = await store.create(orgId, { event_type: body.event_type, target_url: target, secret_sealed: vault.seal(body.secret), description: body.description ?? null }, principal.userId);
        await audit.record({ security: true, action: 'webhooks.create', targetType: 'webhook', targetId: webhook.id, details: { event_type: webhook.event_type, host: new URL(target).host } });
        return reply(201, webhook);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '',
      summary: 'List webhooks',
      description: 'The organization\u2019s subscriptions, by id (never their secrets).',
      responses: { 200: { description: 'The subscriptions', schema: z.object({ items: z.array(webhookSchema) }) } },
      handler: async ({ orgId }) => ({ items: await store.list(orgId) }),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}',
      summary: 'Get a webhook',
      description: 'The subscription, never its secret.',
      request: { params: idParams },
      responses: { 200: { description: 'The subscription', schema: webhookSchema } },
      handler: ({ params, orgId }) => store.get(orgId, params.id),
    }),
    defineRoute({
      ...base,
      method: 'patch',
      path: '/{id}',
      summary: 'Change a webhook',
      description: 'Its event type, target, secret or description; deliveries already made keep the body they were signed with.',
      request: { params: idParams, body: z.object({ event_type: eventType.optional(), target_url: targetUrl.optional(), secret: secret.optional(), description }).strict() },
      responses: { 200: { description: 'The subscription', schema: webhookSchema } },
      handler: async ({ params, body, orgId, audit }) => {
        const target = body.target_url === undefined ? undefined : await checkedTarget(body.target_url);
        const webhook = await store.update(orgId, params.id, {
          ...(body.event_type !== undefined ? { event_type: body.event_type } : {}),
          ...(target !== undefined ? { target_url: target } : {}),
          ...(body.secret !== undefined ? { secret_sealed: vault.seal(body.secret) } : {}),
          ...(body.description !== undefined ? { description: body.description } : {}),
        });
        await audit.record({ security: true, action: 'webhooks.update', targetType: 'webhook', targetId: webhook.id, details: { changed: Object.keys(body) } });
        return webhook;
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/{id}',
      summary: 'Delete a webhook',
      description: 'With its delivery log; a pending delivery is not attempted again.',
      request: { params: idParams },
      responses: { 204: { description: 'Deleted' } },
      handler: async ({ params, orgId, audit }) => {
        await store.remove(orgId, params.id);
        await audit.record({ security: true, action: 'webhooks.delete', targetType: 'webhook', targetId: params.id });
        return reply(204);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/{id}/ping',
      summary: 'Send a ping',
      description: 'A `ping` event (`data: {webhook_id, event_type}`) delivered to the target now, signed and retried like any other; answered with the delivery after its first attempt.',
      request: { params: idParams },
      responses: { 200: { description: 'The delivery after its first attempt', schema: deliverySchema } },
      handler: async ({ params, orgId, audit }) => {
        const webhook = await store.get(orgId, params.id);
        const id = `ping_${crypto.randomUUID()}`;
        const now = storage.now();
        const body = JSON.stringify({ id, type: 'ping', created_at: now, org_id: orgId, data: { webhook_id: webhook.id, event_type: webhook.event_type } });
        const deliveryId = (await store.addDelivery(storage.db, orgId, { webhook_id: webhook.id, event_id: id, event_type: 'ping', body, event_at: now }))!;
        await deliverer.attempt(deliveryId);
        await audit.record({ action: 'webhooks.ping', targetType: 'webhook', targetId: webhook.id, details: { delivery_id: deliveryId } });
        return store.delivery(orgId, webhook.id, deliveryId);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}/deliveries',
      summary: 'A webhook\u2019s delivery log',
      description: 'Newest first: each delivery\u2019s status (`pending` while attempts remain, then `succeeded` or `failed`), attempts, the last status code or error, the next attempt and when it was delivered.',
      request: { params: idParams, query: z.object({ limit: z.coerce.number().int().min(1).max(200).default(50), cursor: z.string().max(200).optional().meta({ description: 'The `next_cursor` of the previous page' }) }) },
      responses: { 200: { description: 'A page of deliveries', schema: z.object({ items: z.array(deliverySchema), next_cursor: z.string().nullable() }) } },
      handler: async ({ params, query, orgId }) => {
        await store.get(orgId, params.id);
        return store.deliveries(orgId, params.id, query);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/{id}/deliveries/{delivery_id}/redeliver',
      summary: 'Deliver again',
      description: 'A delivery that succeeded or failed is sent again (same body, event id and signature), with a new 24 hours of retries; one still pending is a 409, unless its next attempt is more than an hour overdue (its attempt was lost).',
      request: { params: deliveryParams },
      responses: { 202: { description: 'Scheduled now', schema: deliverySchema }, 409: { description: 'The delivery is still pending' } },
      handler: async ({ params, orgId, audit }) => {
        const delivery = await store.delivery(orgId, params.id, params.delivery_id);
        const reopened = await storage.transaction(async (trx) => {
          if (!(await store.reopen(trx, orgId, delivery.id, STALE_PENDING_MS))) return false;
          await deliverer.schedule(trx, orgId, delivery.id);
          return true;
        });
        if (!reopened) throw problems.conflict(`delivery ${delivery.id} is still pending: its next attempt is at ${delivery.next_attempt_at}`);
        await audit.record({ action: 'webhooks.redeliver', targetType: 'webhook', targetId: params.id, details: { delivery_id: delivery.id, event_id: delivery.event_id } });
        return reply(202, await store.delivery(orgId, params.id, delivery.id));
      },
    }),
  ];
}
