import type { Kysely } from 'kysely';
import type { Storage } from '../../storage/index.ts';

export type WorkStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';
/** Why an item ended other than by succeeding (`forbidden`: the user it acts for may no longer act there). */
export type WorkEndReason = 'error' | 'timeout' | 'lost' | 'cancelled' | 'forbidden';

export interface WorkProgress {
  done?: number;
  total?: number;
  message?: string;
}

/** One item of background work as stored and as plugins see it. */
export interface WorkItem {
  id: number;
  /** `<plugin id>.<name>`: the plugin that handles it and which of its handlers. */
  kind: string;
  org_id: number | null;
  payload: unknown;
  status: WorkStatus;
  reason: WorkEndReason | null;
  error: string | null;
  result: unknown;
  progress: WorkProgress | null;
  attempts: number;
  max_attempts: number;
  timeout_ms: number;
  run_after: string;
  cancel_requested: boolean;
  /** The user the work acts for (its audit rows and permissions are theirs); null for platform work. */
  on_behalf_of: number | null;
  /** The capabilities the run is narrowed to (a scoped token asked for it); null = the user's own. */
  on_behalf_scopes: string[] | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface NewWork {
  kind: string;
  orgId: number | null;
  payload: unknown;
  onBehalfOf: number | null;
  /** Narrows the run's capabilities to these (the scopes of the token that asked for it); null = the user's own. */
  scopes: string[] | null;
  maxAttempts: number;
  timeoutMs: number;
  runAfter?: string;
  /** At most one item ever carries a key: a second enqueue with it is ignored (and answers null). */
  dedupeKey?: string;
}

export interface WorkFilter {
  orgId?: number;
  kind?: string;
  /** Kinds starting with this (one plugin's: `<plugin id>.`). */
  kindPrefix?: string;
  status?: WorkStatus;
  /** Id of the last item of the previous page; pages go from newest to oldest. */
  before?: number;
  limit: number;
}

/** The channel that wakes runners: new work, a cancel request. */
export const WORK_CHANNEL = 'platform_background_work';

const TABLE = 'background_work';
/** Retry delay after a failed attempt: doubling from this, capped below, with jitter. */
const BACKOFF_BASE_MS = 1_000;
const BACKOFF_MAX_MS = 5 * 60_000;

/** The background_work table: every statement that reads or changes it. */
export class WorkStore {
  constructor(private readonly storage: Storage) {}

  async enqueue(work: NewWork, db: Kysely<any> = this.storage.db): Promise<WorkItem | null> {
    const { storage } = this;
    const now = storage.now();
    let insert = db.insertInto(TABLE).values({
      kind: work.kind,
      org_id: work.orgId,
      payload: storage.encodeJson(work.payload ?? null),
      status: 'queued',
      attempts: 0,
      max_attempts: work.maxAttempts,
      timeout_ms: work.timeoutMs,
      run_after: work.runAfter ?? now,
      cancel_requested: false,
      on_behalf_of: work.onBehalfOf,
      on_behalf_scopes: work.scopes === null ? null : storage.encodeJson(work.scopes),
      dedupe_key: work.dedupeKey ?? null,
      created_at: now,
    });
    if (work.dedupeKey !== undefined) insert = insert.onConflict((oc) => oc.column('dedupe_key').doNothing());
    const row = await insert.returningAll().executeTakeFirst();
    if (!row) return null;
    await storage.notify(db, WORK_CHANNEL);
    return this.item(row);
  }

  async get(id: number, orgId?: number): Promise<WorkItem | undefined> {
    let query = this.storage.db.selectFrom(TABLE).selectAll().where('id', '=', id);
    if (orgId !== undefined) query = query.where('org_id', '=', orgId);
    const row = await query.executeTakeFirst();
    return row && this.item(row);
  }

  async list(filter: WorkFilter): Promise<WorkItem[]> {
    let query = this.storage.db.selectFrom(TABLE).selectAll().orderBy('id', 'desc').limit(filter.limit);
    if (filter.orgId !== undefined) query = query.where('org_id', '=', filter.orgId);
    if (filter.kind !== undefined) query = query.where('kind', '=', filter.kind);
    if (filter.kindPrefix !== undefined) query = query.where((eb) => eb(eb.fn('substr', ['kind', eb.val(1), eb.val(filter.kindPrefix!.length)]), '=', filter.kindPrefix!));
    if (filter.status !== undefined) query = query.where('status', '=', filter.status);
    if (filter.before !== undefined) query = query.where('id', '<', filter.before);
    return (await query.execute()).map((row) => this.item(row));
  }

  /**
   * Queued work ends cancelled at once; running work is flagged, and the instance running it aborts
   * its signal (woken now, or at its next heartbeat). Answers the item as it then is.
   */
  async cancel(id: number, orgId?: number): Promise<WorkItem | undefined> {
    const { storage } = this;
    const now = storage.now();
    await storage.transaction(async (trx) => {
      const scoped = <Q extends { where: (...args: any[]) => Q }>(query: Q): Q => (orgId === undefined ? query : query.where('org_id', '=', orgId));
      await scoped(trx.updateTable(TABLE).set({ status: 'cancelled', reason: 'cancelled', cancel_requested: true, finished_at: now }).where('id', '=', id).where('status', '=', 'queued')).execute();
      await scoped(trx.updateTable(TABLE).set({ cancel_requested: true }).where('id', '=', id).where('status', '=', 'running')).execute();
      await storage.notify(trx, WORK_CHANNEL);
    });
    return this.get(id, orgId);
  }

  /** Organizations (null = platform work) with work due, the oldest first: claims go round them in turn. */
  async dueGroups(kinds: string[], now: string): Promise<(number | null)[]> {
    if (kinds.length === 0) return [];
    const rows = await this.storage.db
      .selectFrom(TABLE)
      .select(['org_id', (eb) => eb.fn.min('id').as('first')])
      .where('status', '=', 'queued')
      .where('run_after', '<=', now)
      .where('kind', 'in', kinds)
      .groupBy('org_id')
      .orderBy('first')
      .execute();
    return rows.map((r) => (r.org_id === null ? null : Number(r.org_id)));
  }

  /** When the earliest queued item of these kinds not yet due at `now` becomes due (ms since the epoch), if any. */
  async nextDue(kinds: string[], now: string): Promise<number | null> {
    if (kinds.length === 0) return null;
    const row = await this.storage.db
      .selectFrom(TABLE)
      .select((eb) => eb.fn.min('run_after').as('at'))
      .where('status', '=', 'queued')
      .where('run_after', '>', now)
      .where('kind', 'in', kinds)
      .executeTakeFirst();
    return row?.at == null ? null : Date.parse(String(row.at));
  }

  /**
   * Claims up to `count` due items of one organization for `owner`, leased until `leaseUntil`, and
   * at most as many as leave that organization under `orgLimit` running items (counted across
   * instances when the claim is made; two instances claiming for one organization at the same
   * instant may each see the other's claims only after they commit).
   */
  async claim(owner: string, kinds: string[], orgId: number | null, count: number, orgLimit: number, now: string, leaseUntil: string): Promise<WorkItem[]> {
    const { storage } = this;
    return storage.transaction(async (trx) => {
      await storage.commitLazily(trx); // a claim lost in a crash was never started: the item is simply claimed again
      const ofOrg = <Q extends { where: (...args: any[]) => Q }>(query: Q): Q => (orgId === null ? query.where('org_id', 'is', null) : query.where('org_id', '=', orgId));
      const running = await ofOrg(trx.selectFrom(TABLE).select((eb) => eb.fn.countAll().as('n')).where('status', '=', 'running')).executeTakeFirstOrThrow();
      const room = Math.min(count, orgLimit - Number(running.n));
      if (room <= 0) return [];
      const due = await storage
        .skipLocked(ofOrg(trx.selectFrom(TABLE).select('id').where('status', '=', 'queued').where('run_after', '<=', now).where('kind', 'in', kinds)).orderBy('id').limit(room))
        .execute();
      if (due.length === 0) return [];
      const rows = await trx
        .updateTable(TABLE)
        .set((eb) => ({ status: 'running', lease_owner: owner, lease_expires_at: leaseUntil, attempts: eb('attempts', '+', 1), started_at: eb.fn.coalesce('started_at', eb.val(now)) }))
        .where('id', 'in', due.map((r) => r.id))
        .where('status', '=', 'queued')
        .returningAll()
        .execute();
      return rows.map((row) => this.item(row));
    });
  }

  /**
   * Extends the leases of the items `owner` runs; answers, among `ids`, those it still holds and
   * whether a cancel was requested for each (an item missing from the answer was taken from it).
   */
  async heartbeat(owner: string, ids: number[], leaseUntil: string): Promise<Map<number, boolean>> {
    if (ids.length === 0) return new Map();
    const rows = await this.storage.db
      .updateTable(TABLE)
      .set({ lease_expires_at: leaseUntil })
      .where('id', 'in', ids)
      .where('lease_owner', '=', owner)
      .where('status', '=', 'running')
      .returning(['id', 'cancel_requested'])
      .execute();
    return new Map(rows.map((r) => [Number(r.id), Boolean(r.cancel_requested)]));
  }

  async progress(owner: string, id: number, progress: WorkProgress): Promise<void> {
    await this.storage.db.updateTable(TABLE).set({ progress: this.storage.encodeJson(progress) }).where('id', '=', id).where('lease_owner', '=', owner).where('status', '=', 'running').execute();
  }

  /** Records how an attempt ended, if `owner` still holds the item. An error with attempts left is queued again after a backoff. */
  async finish(owner: string, item: WorkItem, outcome: { status: 'succeeded'; result: unknown } | { status: 'failed' | 'cancelled'; reason: WorkEndReason; error: string | null }): Promise<void> {
    const { storage } = this;
    const now = storage.now();
    const values =
      outcome.status === 'succeeded'
        ? { status: 'succeeded', result: storage.encodeJson(outcome.result ?? null), reason: null, error: null, finished_at: now }
        : outcome.reason === 'error' && item.attempts < item.max_attempts
          ? { status: 'queued', error: outcome.error, run_after: new Date(Date.now() + backoffMs(item.attempts)).toISOString() }
          : { status: outcome.status, reason: outcome.reason, error: outcome.error, finished_at: now };
    await storage.transaction(async (trx) => {
      // An outcome lost in a database crash leaves the item running under an expired lease: it is
      // then retried or ends lost, as if this instance had died before recording it.
      await storage.commitLazily(trx);
      await trx.updateTable(TABLE).set({ ...values, lease_owner: null, lease_expires_at: null }).where('id', '=', item.id).where('lease_owner', '=', owner).where('status', '=', 'running').execute();
    });
  }

  /** Hands an item back to the queue as if it had not started (its instance is stopping or its plugin unloading). */
  async release(owner: string, id: number): Promise<void> {
    await this.storage.db
      .updateTable(TABLE)
      .set((eb) => ({ status: 'queued', lease_owner: null, lease_expires_at: null, attempts: eb('attempts', '-', 1) }))
      .where('id', '=', id)
      .where('lease_owner', '=', owner)
      .where('status', '=', 'running')
      .execute();
  }

  /**
   * Work whose lease expired (its instance died or hung): queued again while attempts remain,
   * else failed with reason `lost`. Any instance may run this; each row changes once.
   */
  async reclaimExpired(now: string): Promise<number> {
    const { storage } = this;
    const expired = (q: any) => q.where('status', '=', 'running').where('lease_expires_at', '<', now);
    const retried = await expired(storage.db.updateTable(TABLE))
      .whereRef('attempts', '<', 'max_attempts')
      .where('cancel_requested', '=', false)
      .set({ status: 'queued', error: 'the instance running it stopped answering', lease_owner: null, lease_expires_at: null })
      .executeTakeFirst();
    // Its own condition, not "what the first left": a row that expired between the two statements is retried too.
    const lost = await expired(storage.db.updateTable(TABLE))
      .where((eb: any) => eb.or([eb('attempts', '>=', eb.ref('max_attempts')), eb('cancel_requested', '=', true)]))
      .set((eb: any) => ({
        status: eb.case().when('cancel_requested', '=', true).then('cancelled').else('failed').end(),
        reason: eb.case().when('cancel_requested', '=', true).then('cancelled').else('lost').end(),
        error: 'the instance running it stopped answering',
        lease_owner: null,
        lease_expires_at: null,
        finished_at: now,
      }))
      .executeTakeFirst();
    return Number(retried.numUpdatedRows) + Number(lost.numUpdatedRows);
  }

  private item(row: Record<string, any>): WorkItem {
    const { storage } = this;
    return {
      id: Number(row.id),
      kind: row.kind,
      org_id: row.org_id === null ? null : Number(row.org_id),
      payload: storage.decodeJson(row.payload),
      status: row.status,
      reason: row.reason,
      error: row.error,
      result: row.result === null ? null : storage.decodeJson(row.result),
      progress: row.progress === null ? null : storage.decodeJson<WorkProgress>(row.progress),
      attempts: Number(row.attempts),
      max_attempts: Number(row.max_attempts),
      timeout_ms: Number(row.timeout_ms),
      run_after: row.run_after,
      cancel_requested: Boolean(row.cancel_requested),
      on_behalf_of: row.on_behalf_of === null ? null : Number(row.on_behalf_of),
      on_behalf_scopes: row.on_behalf_scopes === null ? null : storage.decodeJson<string[]>(row.on_behalf_scopes),
      created_at: row.created_at,
      started_at: row.started_at,
      finished_at: row.finished_at,
    };
  }
}

function backoffMs(attempt: number): number {
  const ceiling = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, attempt - 1));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}
