import type { kernelServices, ServiceType } from '../../kernel/plugin-api.ts';
import type { DataApiKeys } from '../publishing/public.ts';
import type { Notifier } from './notifier.ts';

const DAY_MS = 86_400_000;

/**
 * Reminders of what is about to expire: a personal access token (to its owner) and a data API key
 * (to the publisher who minted it), once when it expires within 7 days and once within 1 day. The
 * notification's source key makes each reminder once, however often this runs.
 */
export async function remindExpiring(now: number, tokens: ServiceType<typeof kernelServices.tokens>, keys: DataApiKeys, notifier: Notifier): Promise<number> {
  const iso = (ms: number) => new Date(ms).toISOString();
  let reminders = 0;
  for (const [window, from, to, within] of [
    ['1d', now, now + DAY_MS, 'within a day'],
    ['7d', now + DAY_MS, now + 7 * DAY_MS, 'within 7 days'],
  ] as const) {
    for (const token of await tokens.expiringBetween(iso(from), iso(to))) {
      reminders += 1;
      await notifier.notify({
        user_id: token.user_id,
        org_id: null,
        type: 'token.expiring',
        title: `Your token "${token.name}" expires ${within}`,
        body: `It expires at ${token.expires_at}; requests with it are refused from then on. Mint a new one to replace it.`,
        link: '/api/auth/tokens',
        source_key: `token-expiring-${window}:${token.id}`,
      });
    }
    for (const key of await keys.expiringBetween(iso(from), iso(to))) {
      if (key.minted_by === null) continue;
      reminders += 1;
      await notifier.notify({
        user_id: key.minted_by,
        org_id: key.org_id,
        type: 'api_key.expiring',
        title: `Data API key "${key.name}" expires ${within}`,
        body: `It expires at ${key.expires_at}; its calls are refused from then on. Mint a new key for its consumer.`,
        link: `/api/publishing/api-services/${key.service_id}/keys`,
        source_key: `api-key-expiring-${window}:${key.id}`,
      });
    }
  }
  return reminders;
}
