import type { BackgroundWork, Delegation } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { NewNotification, NotificationStore } from './notification-store.ts';

/** The work kind of a notification's e-mail. */
export const MAIL = 'mail';

/**
 * Makes notifications as their recipients chose: in the inbox, by e-mail (durable work, enqueued
 * with the notification), both or neither. A notification of an organization goes only to a user
 * who may still act there (a member, active): nobody hears of another organization.
 */
export class Notifier {
  constructor(
    private readonly storage: Storage,
    private readonly store: NotificationStore,
    private readonly work: BackgroundWork,
    private readonly delegation: Delegation,
  ) {}

  async notify(notification: NewNotification): Promise<void> {
    if (notification.org_id !== null && 'refused' in (await this.delegation.actFor(notification.user_id, notification.org_id))) return;
    const channels = (await this.store.preferences(notification.user_id)).find((p) => p.type === notification.type);
    if (!channels || (!channels.in_app && !channels.email)) return;
    await this.storage.transaction(async (trx) => {
      const id = await this.store.add(trx, notification, channels.in_app);
      if (id !== null && channels.email) await this.work.enqueue(MAIL, { orgId: notification.org_id, payload: { notification_id: id } }, trx);
    });
  }
}
