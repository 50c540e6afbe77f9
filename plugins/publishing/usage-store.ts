import type { Storage } from '../../storage/index.ts';
import { LATENCY_BUCKETS } from './latency-histogram.ts';

/** What one instance counted of one service, key, endpoint and minute since its last flush. */
export interface MinuteTally {
  serviceId: number;
  keyId: number;
  /** null: a name the service has no endpoint of (the call was answered 403 or 404). */
  endpoint: string | null;
  /** Epoch milliseconds of the minute's start. */
  minute: number;
  /** Calls per latency bucket (see latency-histogram.ts), and those of them that failed. */
  calls: Uint32Array;
  errors: Uint32Array;
  /** Epoch milliseconds of the latest call. */
  lastCallAt: number;
}

/** The usage of one key on one endpoint over a window. */
export interface UsageLine {
  keyId: number;
  keyName: string;
  endpoint: string | null;
  calls: number;
  errors: number;
  /** Calls per latency bucket. */
  histogram: number[];
  lastCallAt: number;
}

/** How `endpoint: null` is kept: the column is part of the primary key, where a NULL never conflicts. */
const NO_ENDPOINT = '';
/** Rows per INSERT: 8 parameters each stays far below either database's limit. */
const ROWS_PER_STATEMENT = 500;

/**
 * The `publishing_usage` table: one row per service, minute, key, endpoint and latency bucket,
 * holding its calls, errors and latest call. A flush only adds (INSERT … ON CONFLICT DO UPDATE SET
 * calls = calls + excluded.calls), so instances sharing a Postgres add into the same rows without
 * reading them first, and the histogram merges by the same addition (it is rows, not a JSON value
 * to read, merge and write back under a lock).
 */
export class UsageStore {
  constructor(private readonly storage: Storage) {}

  /** Adds the tallies to the table in one transaction; those of services deleted since (with their keys) are dropped. */
  async add(tallies: MinuteTally[]): Promise<void> {
    const serviceIds = [...new Set(tallies.map((t) => t.serviceId))];
    if (!serviceIds.length) return;
    await this.storage.transaction(async (trx) => {
      const live = new Set((await trx.selectFrom('publishing_services').select('id').where('id', 'in', serviceIds).execute()).map((row) => Number(row.id)));
      // One order for every instance: two flushes upserting the same rows lock them in the same order (no deadlock).
      const rows = tallies
        .filter((t) => live.has(t.serviceId))
        .flatMap(rowsOf)
        .sort((a, b) => a.service_id - b.service_id || a.minute - b.minute || a.key_id - b.key_id || compare(a.endpoint, b.endpoint) || a.bucket - b.bucket);
      for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
        await trx
          .insertInto('publishing_usage')
          .values(rows.slice(i, i + ROWS_PER_STATEMENT))
          .onConflict((oc) =>
            oc.columns(['service_id', 'minute', 'key_id', 'endpoint', 'bucket']).doUpdateSet((eb) => ({
              calls: eb('publishing_usage.calls', '+', eb.ref('excluded.calls')),
              errors: eb('publishing_usage.errors', '+', eb.ref('excluded.errors')),
              last_call_at: eb
                .case()
                .when('excluded.last_call_at', '>', eb.ref('publishing_usage.last_call_at'))
                .then(eb.ref('excluded.last_call_at'))
                .else(eb.ref('publishing_usage.last_call_at'))
                .end(),
            })),
          )
          .execute();
      }
    });
  }

  /** Deletes the usage of the minutes starting before `before` (epoch ms), every service's. */
  async prune(before: number): Promise<void> {
    await this.storage.db.deleteFrom('publishing_usage').where('minute', '<', before).execute();
  }

  /** Per key and endpoint, the calls of service `serviceId` in the minutes starting in [since, until). */
  async read(serviceId: number, since: number, until: number): Promise<UsageLine[]> {
    const rows = await this.storage.db
      .selectFrom('publishing_usage as u')
      .innerJoin('publishing_keys as k', 'k.id', 'u.key_id')
      .select(['u.key_id', 'k.name as key_name', 'u.endpoint', 'u.bucket'])
      .select((eb) => [eb.fn.sum('u.calls').as('calls'), eb.fn.sum('u.errors').as('errors'), eb.fn.max('u.last_call_at').as('last_call_at')])
      .where('u.service_id', '=', serviceId)
      .where('u.minute', '>=', since)
      .where('u.minute', '<', until)
      .groupBy(['u.key_id', 'k.name', 'u.endpoint', 'u.bucket'])
      .execute();
    const lines = new Map<string, UsageLine>();
    for (const row of rows) {
      const keyId = Number(row.key_id);
      const id = `${keyId} ${row.endpoint}`;
      let line = lines.get(id);
      if (!line) {
        const endpoint = row.endpoint === NO_ENDPOINT ? null : String(row.endpoint);
        lines.set(id, (line = { keyId, keyName: String(row.key_name), endpoint, calls: 0, errors: 0, histogram: new Array(LATENCY_BUCKETS).fill(0), lastCallAt: 0 }));
      }
      const calls = Number(row.calls);
      line.calls += calls;
      line.errors += Number(row.errors);
      line.histogram[Number(row.bucket)] += calls;
      line.lastCallAt = Math.max(line.lastCallAt, Number(row.last_call_at));
    }
    return [...lines.values()].sort((a, b) => a.keyId - b.keyId || compare(a.endpoint ?? NO_ENDPOINT, b.endpoint ?? NO_ENDPOINT));
  }
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function rowsOf(tally: MinuteTally) {
  const rows = [];
  for (let bucket = 0; bucket < tally.calls.length; bucket++) {
    if (!tally.calls[bucket]) continue;
    rows.push({
      service_id: tally.serviceId,
      minute: tally.minute,
      key_id: tally.keyId,
      endpoint: tally.endpoint ?? NO_ENDPOINT,
      bucket,
      calls: tally.calls[bucket],
      errors: tally.errors[bucket],
      last_call_at: tally.lastCallAt,
    });
  }
  return rows;
}
