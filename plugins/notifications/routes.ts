import { defineRoute, identitySchemas as s, reply, z } from '../../kernel/plugin-api.ts';
import type { NotificationStore } from './notification-store.ts';
import { NOTIFICATION_TYPES } from './notification-types.ts';

/** Every route is the caller's own: their inbox and their preferences, whichever organization they work in. */
const base = { security: 'bearer' } as const;
const idParams = s.idParam('id');

const notificationSchema = z
  .object({
    id: z.number().int(),
    type: z.string(),
    org_id: z.number().int().nullable().describe('The organization it is about (null: about your account, e.g. a token)'),
    title: z.string(),
    body: z.string(),
    link: z.string().nullable().describe('The API resource it is about'),
    created_at: z.string(),
    read_at: z.string().nullable(),
  })
  .meta({ id: 'Notification' });

const preferenceSchema = z.object({ type: z.string(), description: z.string(), in_app: z.boolean(), email: z.boolean() }).meta({ id: 'NotificationPreference' });
const preferencesAnswer = z.object({ items: z.array(preferenceSchema) });

const TYPES = Object.keys(NOTIFICATION_TYPES);

export function notificationRoutes(store: NotificationStore) {
  return [
    defineRoute({
      ...base,
      method: 'get',
      path: '',
      summary: 'Your notifications',
      description: 'Newest first, a page at a time (`next_cursor`); `unread=true` for those not read yet.',
      request: {
        query: z.object({
          unread: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
          limit: z.coerce.number().int().min(1).max(200).default(50),
          cursor: z.string().max(200).optional().meta({ description: 'The `next_cursor` of the previous page' }),
        }),
      },
      responses: { 200: { description: 'A page of notifications', schema: z.object({ items: z.array(notificationSchema), next_cursor: z.string().nullable() }) } },
      handler: ({ query, principal }) => store.inbox(principal.userId, query),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/unread-count',
      summary: 'How many of your notifications are unread',
      description: 'For a badge: one count, cheap to ask often.',
      responses: { 200: { description: 'The count', schema: z.object({ count: z.number().int() }) } },
      handler: async ({ principal }) => ({ count: await store.unreadCount(principal.userId) }),
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/read-all',
      summary: 'Mark all your notifications read',
      description: 'Answers how many were unread.',
      responses: { 200: { description: 'Marked', schema: z.object({ updated: z.number().int() }) } },
      handler: async ({ principal }) => ({ updated: await store.markAllRead(principal.userId) }),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/preferences',
      summary: 'Your notification preferences',
      description: 'Per notification type, whether it comes to the inbox (`in_app`) and by e-mail (`email`); a type you never chose has its default.',
      responses: { 200: { description: 'The preferences, one per type', schema: preferencesAnswer } },
      handler: async ({ principal }) => ({ items: await store.preferences(principal.userId) }),
    }),
    defineRoute({
      ...base,
      method: 'put',
      path: '/preferences',
      summary: 'Choose your notification channels',
      description: 'The types listed get these channels; the others keep theirs. Both channels off: that notification is not made at all.',
      request: {
        body: z
          .object({
            items: z
              .array(z.object({ type: z.enum(TYPES as [string, ...string[]]), in_app: z.boolean(), email: z.boolean() }).strict())
              .min(1)
              .max(TYPES.length)
              .refine((items) => new Set(items.map((i) => i.type)).size === items.length, { message: 'a type is listed twice' }),
          })
          .strict(),
      },
      responses: { 200: { description: 'The preferences, one per type', schema: preferencesAnswer } },
      handler: async ({ body, principal }) => ({ items: await store.setPreferences(principal.userId, body.items) }),
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/{id}/read',
      summary: 'Mark a notification read',
      description: 'One of yours; marking it again keeps its first read time.',
      request: { params: idParams },
      responses: { 200: { description: 'The notification', schema: notificationSchema }, 404: { description: 'No such notification in your inbox' } },
      handler: ({ params, principal }) => store.markRead(principal.userId, params.id),
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/{id}',
      summary: 'Delete a notification',
      description: 'It leaves your inbox for good: the same event does not bring it back.',
      request: { params: idParams },
      responses: { 204: { description: 'Deleted' }, 404: { description: 'No such notification in your inbox' } },
      handler: async ({ params, principal }) => {
        await store.remove(principal.userId, params.id);
        return reply(204);
      },
    }),
  ];
}
