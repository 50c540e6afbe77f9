import crypto from 'node:crypto';
import { OutboundFailedError, OutboundRefusedError, RELEASE, type BackgroundWork, type kernelServices, type ServiceType } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { DeliveryJob, WebhookStore } from './webhook-store.ts';

/** The work kind of one attempt of one delivery. */
export const DELIVER = 'deliver';

/** No retry waits longer than an hour, however many came before. */
const MAX_DELAY_MS = 3_600_000;

/** `sha256=<hex>`: the HMAC-SHA256 of the exact body with the subscription's secret, as GitHub and Stripe sign theirs. */
export function signature(secret: string, body: string): string {
  return `sha256=${crypto.createHmac('sha256', secret).update(body).digest('hex')}`;
}

/**
 * The wait before the next attempt after `attempts` failed ones: exponential backoff with full
 * jitter (a random time up to base × 2^(attempts-1), at most an hour), so receivers coming back
 * after an outage are not met by every sender at once.
 */
export function retryDelayMs(attempts: number, baseMs: number): number {
  const ceiling = Math.min(MAX_DELAY_MS, baseMs * 2 ** Math.min(attempts - 1, 30));
  return Math.floor(Math.random() * ceiling);
}

export interface DelivererDeps {
  storage: Storage;
  store: WebhookStore;
  work: BackgroundWork;
  vault: ServiceType<typeof kernelServices.vault>;
  outbound: ServiceType<typeof kernelServices.outbound>;
  retryBaseMs: number;
}

/**
 * Attempts deliveries: one POST each, signed, and the outcome recorded with the next attempt's
 * work item in one transaction, so a crash between them loses nothing (the item is leased: another
 * instance takes it over, and a delivery is sent at least once).
 */
export class Deliverer {
  constructor(private readonly deps: DelivererDeps) {}

  /** Enqueues the first attempt of a new (or reopened) delivery, in `db`'s transaction. */
  schedule(db: Parameters<BackgroundWork['enqueue']>[2], orgId: number, deliveryId: number, runAfter?: Date) {
    return this.deps.work.enqueue(DELIVER, { orgId, payload: { delivery_id: deliveryId }, runAfter }, db);
  }

  /** One attempt of the delivery, if it is still pending. */
  async attempt(deliveryId: number): Promise<void> {
    const { store, storage, vault } = this.deps;
    const job = await store.job(deliveryId);
    if (!job) return;
    // Whatever goes wrong before an answer is a failed attempt, retried as any: the delivery never stays pending with nothing to attempt it.
    const sent = await Promise.resolve()
      .then(() => this.post(job, vault.open(job.secret_sealed)))
      .catch((err: unknown) => ({ ok: false, status: null, error: `the delivery could not be sent: ${(err as Error).message}` }));
    const attempts = job.attempts + 1;
    const now = Date.now();
    await storage.transaction(async (trx) => {
      if (sent.ok) {
        await store.recordAttempt(trx, job.id, job.attempts, { status: 'succeeded', attempts, last_status_code: sent.status, last_error: null, next_attempt_at: null, delivered_at: new Date(now).toISOString() });
        return;
      }
      const next = now + retryDelayMs(attempts, this.deps.retryBaseMs);
      const giveUp = next > Date.parse(job.deadline_at);
      const changed = await store.recordAttempt(trx, job.id, job.attempts, {
        status: giveUp ? 'failed' : 'pending',
        attempts,
        last_status_code: sent.status,
        last_error: sent.error,
        next_attempt_at: giveUp ? null : new Date(next).toISOString(),
        delivered_at: null,
      });
      if (changed && !giveUp) await this.schedule(trx, job.org_id, job.id, new Date(next));
    });
  }

  private async post(job: DeliveryJob, secret: string): Promise<{ ok: boolean; status: number | null; error: string | null }> {
    try {
      const response = await this.deps.outbound.request(job.target_url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': `data-platform-webhooks/${RELEASE}`,
          'x-service-event': job.event_type,
          'x-service-delivery': String(job.id),
          'x-service-signature': signature(secret, job.body),
        },
        body: job.body,
      });
      if (response.status >= 200 && response.status < 300) return { ok: true, status: response.status, error: null };
      // Only the status: what an endpoint answers is not shown back (a target can be somewhere the caller cannot see).
      return { ok: false, status: response.status, error: `answered ${response.status}` };
    } catch (err) {
      if (err instanceof OutboundRefusedError || err instanceof OutboundFailedError) return { ok: false, status: null, error: err.message };
      throw err;
    }
  }
}
