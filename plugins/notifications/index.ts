import { definePlugin, kernelServices, z } from '../../kernel/plugin-api.ts';
import { organizationBranding } from '../branding/public.ts';
import { dataApiKeys } from '../publishing/public.ts';
import { remindExpiring } from './expiring.ts';
import { notificationMail } from './mail.ts';
import { notificationsMigrations } from './migrations.ts';
import { NotificationStore } from './notification-store.ts';
import { MAIL, Notifier } from './notifier.ts';
import { notificationRoutes } from './routes.ts';
import { notificationsOf, SOURCE_EVENTS } from './sources.ts';

/**
 * The `notifications` router: each user's inbox and channel preferences, fed by the platform's
 * durable events and by a periodic look for what is about to expire; e-mails in the organization's
 * branding, sent as background work.
 */
export default definePlugin({
  deps: {
    storage: kernelServices.storage,
    events: kernelServices.events,
    work: kernelServices.work,
    delegation: kernelServices.delegation,
    tokens: kernelServices.tokens,
    users: kernelServices.users,
    organizations: kernelServices.organizations,
    mail: kernelServices.mail,
    config: kernelServices.config,
  },
  migrations: notificationsMigrations,
  init: ({ storage, events, work, delegation, tokens, users, organizations, mail, config }, ctx) => {
    const store = new NotificationStore(storage);
    const notifier = new Notifier(storage, store, work, delegation);
    const branding = ctx.useService(organizationBranding);
    const keys = ctx.useService(dataApiKeys);

    events.subscribe('sources', {
      types: SOURCE_EVENTS,
      handle: async (event) => {
        const admins = async (orgId: number) => (await organizations.members(orgId)).filter((m) => m.role === 'admin').map((m) => m.user_id);
        for (const notification of await notificationsOf(event, admins)) await notifier.notify(notification);
      },
    });

    work.handle('expiring', async () => ({ reminders: await remindExpiring(Date.now(), tokens, keys, notifier) }));
    work.every('expiring', { cron: config.NOTIFY_EXPIRY_CHECK_CRON });

    // The e-mail of a notification: to the user's address, in the branding of its organization (of
    // the user's default organization for one about their account). Retried when the server refuses.
    work.handle<{ notification_id: number }>(
      MAIL,
      async ({ payload }) => {
        const notification = await store.forMail(payload.notification_id);
        const user = notification && (await users.get(notification.user_id));
        if (!notification || !user?.is_active || !user.email) return { sent: false };
        const orgId = notification.org_id ?? user.default_org_id;
        const brand = orgId === null ? null : await branding.get(orgId);
        await mail.send(notificationMail(user.email, notification, brand, config.PUBLIC_URL));
        return { sent: true };
      },
      { payload: z.object({ notification_id: z.number().int() }), maxAttempts: 5, timeoutMs: 60_000 },
    );

    return { routes: notificationRoutes(store) };
  },
});
