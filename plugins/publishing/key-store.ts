import crypto from 'node:crypto';
import { andThen, ChangeCountedCache, problems, type ApiKeyGrant, type Maybe } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import { PUBLISHING_COUNTER } from './migrations.ts';

/** Every data API key starts with it (spec §5.14), so the kernel offers it to this plugin's authenticator alone. */
export const DATA_KEY_PREFIX = 'dpk_';
/** What lists show of a key to recognize it: the prefix and a few characters. */
const DISPLAY_PREFIX_LENGTH = DATA_KEY_PREFIX.length + 6;
/** How fresh `last_used_at` is kept: one write per key and minute, not one per call. */
const LAST_USED_RESOLUTION_MS = 60_000;

export type FixedParams = Record<string, string | number | boolean | null>;

export interface DataKey {
  id: number;
  service_id: number;
  name: string;
  key_prefix: string;
  /** Endpoint names the key may call; null: every endpoint of its service. */
  allowed_endpoints: string[] | null;
  /** Inputs locked for every call of the key (a SQL parameter or a lookup column). */
  fixed_params: FixedParams;
  rate_limit_per_min: number | null;
  expires_at: string | null;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  state: 'active' | 'revoked' | 'expired';
}

export type KeyFields = Pick<DataKey, 'name' | 'allowed_endpoints' | 'fixed_params' | 'rate_limit_per_min' | 'expires_at'>;

/** A key as a call sees it: what it may call and with which locked inputs, and who minted it. */
export interface KeyRecord extends DataKey {
  org_id: number;
  /** The service's publisher when the key was minted (only the publisher mints). */
  minted_by: number | null;
}

/**
 * Data API keys of API Services. Only a keyed HMAC of each secret is kept (`hmac`: the kernel's, as
 * for PATs); the secret is answered once, at mint.
 */
export class KeyStore {
  private readonly byHash: ChangeCountedCache<string, KeyRecord | null>;
  private readonly byId: ChangeCountedCache<string, KeyRecord | undefined>;
  /**
   * The grant of each cached key record, one object as long as the record is kept (the kernel keeps
   * the principal it makes of a grant by the grant), with the key's expiry as a number and when its
   * use was last stamped (the record's `last_used_at`, then this instance's stamps: a stamp is not a
   * change that reloads the record).
   */
  private readonly grants = new WeakMap<KeyRecord, { grant: ApiKeyGrant; expiresAtMs: number | null; lastUsedMs: number }>();

  constructor(
    private readonly storage: Storage,
    private readonly hmac: (secret: string) => string,
  ) {
    this.byHash = new ChangeCountedCache(storage, PUBLISHING_COUNTER);
    this.byId = new ChangeCountedCache(storage, PUBLISHING_COUNTER);
  }

  private decode(row: Record<string, any>): KeyRecord {
    const expired = row.expires_at !== null && Date.parse(row.expires_at) <= Date.now();
    return {
      id: Number(row.id),
      org_id: Number(row.org_id),
      service_id: Number(row.service_id),
      minted_by: row.created_by === null ? null : Number(row.created_by),
      name: row.name,
      key_prefix: row.key_prefix,
      allowed_endpoints: row.allowed_endpoints === null ? null : this.storage.decodeJson<string[]>(row.allowed_endpoints),
      fixed_params: this.storage.decodeJson<FixedParams>(row.fixed_params),
      rate_limit_per_min: row.rate_limit_per_min === null ? null : Number(row.rate_limit_per_min),
      expires_at: row.expires_at,
      created_at: row.created_at,
      last_used_at: row.last_used_at,
      revoked_at: row.revoked_at,
      state: row.revoked_at !== null ? 'revoked' : expired ? 'expired' : 'active',
    };
  }

  async mint(orgId: number, serviceId: number, fields: KeyFields, userId: number): Promise<{ secret: string; key: KeyRecord }> {
    const secret = `${DATA_KEY_PREFIX}${crypto.randomBytes(32).toString('base64url')}`;
    const row = await this.storage.db
      .insertInto('publishing_keys')
      .values({
        org_id: orgId,
        service_id: serviceId,
        name: fields.name,
        key_hash: this.hmac(secret),
        key_prefix: secret.slice(0, DISPLAY_PREFIX_LENGTH),
        allowed_endpoints: fields.allowed_endpoints === null ? null : this.storage.encodeJson(fields.allowed_endpoints),
        fixed_params: this.storage.encodeJson(fields.fixed_params),
        rate_limit_per_min: fields.rate_limit_per_min,
        expires_at: fields.expires_at,
        created_by: userId,
        created_at: this.storage.now(),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { secret, key: this.decode(row) };
  }

  /** Keys not revoked expiring after `from` and at or before `to` (ISO instants), every organization's. */
  async expiringBetween(from: string, to: string): Promise<KeyRecord[]> {
    const rows = await this.storage.db.selectFrom('publishing_keys').selectAll().where('revoked_at', 'is', null).where('expires_at', '>', from).where('expires_at', '<=', to).orderBy('id').execute();
    return rows.map((row) => this.decode(row));
  }

  async list(orgId: number, serviceId: number): Promise<KeyRecord[]> {
    const rows = await this.storage.db.selectFrom('publishing_keys').selectAll().where('org_id', '=', orgId).where('service_id', '=', serviceId).orderBy('id').execute();
    return rows.map((row) => this.decode(row));
  }

  async get(orgId: number, id: number): Promise<KeyRecord | undefined> {
    const row = await this.storage.db.selectFrom('publishing_keys').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    return row && this.decode(row);
  }

  /** The key as a call sees it (from memory until services or keys change): what it may call, with which locked inputs. */
  callerOf(orgId: number, id: number): Maybe<KeyRecord | undefined> {
    return this.byId.get(`${orgId}:${id}`, () => this.get(orgId, id));
  }

  /** Revokes the key; `revokedNow` is false when it already was. */
  async revoke(orgId: number, serviceId: number, id: number): Promise<{ key: KeyRecord; revokedNow: boolean }> {
    const found = await this.get(orgId, id);
    if (!found || found.service_id !== serviceId) throw problems.notFound(`no data API key ${id} on API Service ${serviceId}`);
    if (found.revoked_at !== null) return { key: found, revokedNow: false };
    await this.storage.db.updateTable('publishing_keys').set({ revoked_at: this.storage.now() }).where('id', '=', id).where('revoked_at', 'is', null).execute();
    return { key: (await this.get(orgId, id))!, revokedNow: true };
  }

  /**
   * The grant of an active key (stamping its use), or null for an unknown, revoked or expired one.
   * Keys are read from memory until services or keys change (a revocation moves the counter: the
   * next call is refused on every instance); expiry is checked on every call.
   */
  authenticate(secret: string): Maybe<ApiKeyGrant | null> {
    const hash = this.hmac(secret);
    const key = this.byHash.get(hash, async () => {
      const row = await this.storage.db.selectFrom('publishing_keys').selectAll().where('key_hash', '=', hash).executeTakeFirst();
      return row ? this.decode(row) : null;
    });
    return andThen(key, (found) => this.grantOf(found));
  }

  private grantOf(key: KeyRecord | null): Maybe<ApiKeyGrant | null> {
    if (!key || key.revoked_at !== null) return null;
    let known = this.grants.get(key);
    if (!known) {
      // A key carries no capability: what it may call is its service's endpoints, checked by the service path.
      const grant = { keyId: key.id, name: key.name, orgId: key.org_id, capabilities: [], allowed: key.allowed_endpoints };
      const lastUsedMs = key.last_used_at === null ? 0 : Date.parse(key.last_used_at);
      this.grants.set(key, (known = { grant, expiresAtMs: key.expires_at === null ? null : Date.parse(key.expires_at), lastUsedMs }));
    }
    const now = Date.now();
    if (known.expiresAtMs !== null && known.expiresAtMs <= now) return null;
    if (known.lastUsedMs >= now - LAST_USED_RESOLUTION_MS) return known.grant;
    known.lastUsedMs = now;
    return this.storage.db
      .updateTable('publishing_keys')
      .set({ last_used_at: new Date(now).toISOString() })
      .where('id', '=', key.id)
      .execute()
      .then(() => known.grant);
  }
}
