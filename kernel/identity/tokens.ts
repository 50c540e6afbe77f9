import crypto from 'node:crypto';
import zlib from 'node:zlib';
import type { Storage } from '../../storage/index.ts';
import { PLATFORM_ADMIN_ROLE } from './users.ts';
import { problems } from '../problem.ts';

export const PAT_PREFIX = 'svc_';
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** 43 base62 characters carry 256 bits: as much as 32 random bytes. */
const RANDOM_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
const DISPLAY_PREFIX_LENGTH = PAT_PREFIX.length + 6;

function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of crypto.randomBytes(length)) {
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62]; // 248 = 4 × 62: no modulo bias
    }
  }
  return out;
}

function checksum(body: string): string {
  let value = zlib.crc32(body);
  let out = '';
  for (let i = 0; i < CHECKSUM_LENGTH; i += 1) {
    out = ALPHABET[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out;
}

/**
 * A new secret: `svc_` + 43 random base62 characters + a 6-character CRC32 checksum, so secret
 * scanners can recognise a real token (and reject a typo) without asking the server.
 */
export function generatePatSecret(): string {
  const body = randomBase62(RANDOM_LENGTH);
  return `${PAT_PREFIX}${body}${checksum(body)}`;
}

/** True when the secret has the PAT shape and its checksum matches. */
export function hasValidChecksum(secret: string): boolean {
  const body = secret.slice(PAT_PREFIX.length, PAT_PREFIX.length + RANDOM_LENGTH);
  return secret.length === PAT_PREFIX.length + RANDOM_LENGTH + CHECKSUM_LENGTH && secret.startsWith(PAT_PREFIX) && secret.endsWith(checksum(body));
}

export interface TokenRow {
  id: number;
  user_id: number;
  name: string;
  token_hash: string;
  hash_kind: 'hmac' | 'sha256';
  token_prefix: string;
  scopes: unknown;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
  revoked_by: number | null;
}

/** The token after a revoke, and whether this call revoked it (false: it already was). */
export interface Revocation {
  info: TokenInfo;
  revokedNow: boolean;
}

export interface TokenInfo {
  id: number;
  user_id: number;
  username?: string;
  name: string;
  token_prefix: string;
  scopes: string[] | null;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  revoked_at: string | null;
  state: 'active' | 'revoked' | 'expired';
}

/** A PAT row with its scopes decoded (null = the owner's full permissions) and its expiry in ms. */
export interface ResolvedToken {
  token: TokenRow;
  scopes: ReadonlySet<string> | null;
  expiresAtMs: number | null;
}

/** How fresh `last_used_at` is kept. */
const LAST_USED_RESOLUTION_MS = 60_000;
const STAMPED_TOKENS_KEPT = 10_000;
const RECENT_HMACS_KEPT = 10_000;

/**
 * Personal access tokens (spec §2.3, §3.1, §5.5–5.9). Only a keyed HMAC-SHA256 of each secret is
 * stored; rows from earlier releases holding a bare SHA-256 are upgraded on their first use.
 */
export class PersonalAccessTokens {
  /** When this instance last wrote each token's `last_used_at` (ms). */
  private readonly lastStamped = new Map<number, number>();
  /**
   * HMACs of secrets presented lately: computing one costs more than the rest of a token check.
   * Process memory only (as the verified-JWT cache holds JWTs); never stored, logged or answered.
   */
  private readonly recentHmacs = new Map<string, string>();

  constructor(
    private readonly storage: Storage,
    private readonly hashKey: string,
    private readonly maxPerUser: number,
  ) {}

  hmac(secret: string): string {
    let hmac = this.recentHmacs.get(secret);
    if (hmac === undefined) {
      hmac = crypto.createHmac('sha256', this.hashKey).update(secret).digest('hex');
      if (this.recentHmacs.size >= RECENT_HMACS_KEPT) this.recentHmacs.delete(this.recentHmacs.keys().next().value!);
      this.recentHmacs.set(secret, hmac);
    }
    return hmac;
  }

  async mint(userId: number, input: { name: string; scopes: string[] | null; expiresInDays: number }): Promise<{ secret: string; info: TokenInfo }> {
    const now = new Date();
    const secret = generatePatSecret();
    return this.storage.transaction(async (trx) => {
      // Concurrent mints of one user count one after the other, or several would pass the cap.
      await this.storage.lockForTransaction(trx, `pat-mint:${userId}`);
      const active = await trx
        .selectFrom('personal_access_tokens')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('user_id', '=', userId)
        .where('revoked_at', 'is', null)
        .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now.toISOString())]))
        .executeTakeFirstOrThrow();
      if (Number(active.n) >= this.maxPerUser) {
        throw problems.conflict(`you already have ${this.maxPerUser} active tokens (PAT_MAX_PER_USER); revoke one before minting another`);
      }
      const row = (await trx
        .insertInto('personal_access_tokens')
        .values({
          user_id: userId,
          name: input.name,
          token_hash: this.hmac(secret),
          hash_kind: 'hmac',
          token_prefix: secret.slice(0, DISPLAY_PREFIX_LENGTH),
          scopes: input.scopes === null ? null : this.storage.encodeJson([...new Set(input.scopes)].sort()),
          created_at: now.toISOString(),
          expires_at: input.expiresInDays === 0 ? null : new Date(now.getTime() + input.expiresInDays * 86_400_000).toISOString(),
        })
        .returningAll()
        .executeTakeFirstOrThrow()) as TokenRow;
      return { secret, info: this.toInfo(row) };
    });
  }

  /**
   * The live token a secret names, or a reason it is refused. `find` looks a token up by the HMAC
   * of its secret (the identity snapshot; the database by default). Upgrades a legacy SHA-256 row
   * to HMAC on its first use; stamps `last_used_at` (see `noteUse`).
   */
  async resolve(secret: string, find: (hmac: string) => ResolvedToken | undefined | Promise<ResolvedToken | undefined> = (hmac) => this.findByHmac(hmac)): Promise<ResolvedToken | { refused: string }> {
    if (!hasValidChecksum(secret) && !(await this.hasLegacyRow(secret))) return { refused: 'unknown token' };
    const hmac = this.hmac(secret);
    const resolved = (await find(hmac)) ?? (await this.upgradeLegacy(secret, hmac));
    if (!resolved) return { refused: 'unknown token' };
    if (resolved.token.revoked_at) return { refused: 'token revoked' };
    const now = Date.now();
    if (resolved.expiresAtMs !== null && resolved.expiresAtMs <= now) return { refused: 'token expired' };
    await this.noteUse(resolved.token.id, now);
    return resolved;
  }

  async findByHmac(hmac: string): Promise<ResolvedToken | undefined> {
    const row = (await this.storage.db.selectFrom('personal_access_tokens').selectAll().where('token_hash', '=', hmac).where('hash_kind', '=', 'hmac').executeTakeFirst()) as TokenRow | undefined;
    return row && this.resolved(row);
  }

  private async upgradeLegacy(secret: string, hmac: string): Promise<ResolvedToken | undefined> {
    const legacy = crypto.createHash('sha256').update(secret).digest('hex');
    const row = (await this.storage.db
      .updateTable('personal_access_tokens')
      .set({ token_hash: hmac, hash_kind: 'hmac' })
      .where('token_hash', '=', legacy)
      .where('hash_kind', '=', 'sha256')
      .returningAll()
      .executeTakeFirst()) as TokenRow | undefined;
    return row && this.resolved(row);
  }

  private resolved(row: TokenRow): ResolvedToken {
    const scopes = this.storage.decodeJson<string[] | null>(row.scopes) ?? null;
    return { token: row, scopes: scopes && new Set(scopes), expiresAtMs: row.expires_at ? Date.parse(row.expires_at) : null };
  }

  /**
   * Writes `last_used_at` at most once a minute per token and instance (as GitLab does, at a
   * coarser grain): a write on every request would cost more than the request itself.
   */
  noteUse(tokenId: number, now: number): Promise<unknown> | undefined {
    const last = this.lastStamped.get(tokenId);
    if (last !== undefined && now - last < LAST_USED_RESOLUTION_MS) return undefined;
    this.lastStamped.delete(tokenId);
    if (this.lastStamped.size >= STAMPED_TOKENS_KEPT) this.lastStamped.delete(this.lastStamped.keys().next().value!);
    this.lastStamped.set(tokenId, now);
    return this.storage.db.updateTable('personal_access_tokens').set({ last_used_at: new Date(now).toISOString() }).where('id', '=', tokenId).execute();
  }

  /** Active tokens (not revoked) expiring after `from` and at or before `to` (ISO instants), every user's. */
  async expiringBetween(from: string, to: string): Promise<TokenInfo[]> {
    const rows = await this.storage.db.selectFrom('personal_access_tokens').selectAll().where('revoked_at', 'is', null).where('expires_at', '>', from).where('expires_at', '<=', to).orderBy('id').execute();
    return rows.map((r) => this.toInfo(r as TokenRow));
  }

  async listForUser(userId: number): Promise<TokenInfo[]> {
    const rows = await this.storage.db.selectFrom('personal_access_tokens').selectAll().where('user_id', '=', userId).orderBy('id').execute();
    return rows.map((r) => this.toInfo(r as TokenRow));
  }

  /** Every token the organization governs (see `orgTokens`). */
  async listForOrganization(orgId: number, callerIsPlatformAdmin: boolean): Promise<TokenInfo[]> {
    const rows = await this.orgTokens(orgId, callerIsPlatformAdmin).orderBy('t.id').execute();
    return rows.map((r) => ({ ...this.toInfo(r as unknown as TokenRow), username: r.username as string }));
  }

  /** Revokes the caller's own token; someone else's is "not found". Revoking twice changes nothing. */
  async revokeOwn(userId: number, id: number): Promise<Revocation> {
    const row = (await this.storage.db.selectFrom('personal_access_tokens').selectAll().where('id', '=', id).where('user_id', '=', userId).executeTakeFirst()) as TokenRow | undefined;
    if (!row) throw problems.notFound(`no token ${id} of yours`);
    return this.revoke(row, userId);
  }

  /** Revokes any token the organization governs (org.admin governance, see `orgTokens`). */
  async revokeInOrganization(orgId: number, id: number, admin: { userId: number; isPlatformAdmin: boolean }): Promise<Revocation> {
    const row = (await this.orgTokens(orgId, admin.isPlatformAdmin).where('t.id', '=', id).executeTakeFirst()) as unknown as TokenRow | undefined;
    if (!row) throw problems.notFound(`no token ${id} in this organization`);
    return this.revoke(row, admin.userId);
  }

  private async revoke(row: TokenRow, by: number): Promise<Revocation> {
    if (row.revoked_at) return { info: this.toInfo(row), revokedNow: false };
    const updated = await this.storage.db
      .updateTable('personal_access_tokens')
      .set({ revoked_at: this.storage.now(), revoked_by: by })
      .where('id', '=', row.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return { info: this.toInfo(updated as TokenRow), revokedNow: true };
  }

  /**
   * Tokens an organization governs. A token belongs to a person, who may belong to several
   * organizations, and any org admin can add an existing user as a member: so an org admin governs
   * the tokens of the members whose home (default) organization it is — which only a platform
   * admin can set — and never a platform admin's. A platform admin governs every member's tokens.
   */
  private orgTokens(orgId: number, callerIsPlatformAdmin: boolean) {
    let query = this.storage.db
      .selectFrom('personal_access_tokens as t')
      .innerJoin('organization_members as m', 'm.user_id', 't.user_id')
      .innerJoin('users as u', 'u.id', 't.user_id')
      .selectAll('t')
      .select('u.username')
      .where('m.org_id', '=', orgId);
    if (!callerIsPlatformAdmin) query = query.where('u.role', '!=', PLATFORM_ADMIN_ROLE).where('u.default_org_id', '=', orgId);
    return query;
  }

  /**
   * Legacy secrets predate the checksum; only they may skip the checksum check: before their
   * upgrade (bare SHA-256 row) and after it (HMAC row), or they would work exactly once.
   */
  private async hasLegacyRow(secret: string): Promise<boolean> {
    const legacy = crypto.createHash('sha256').update(secret).digest('hex');
    const hmac = this.hmac(secret);
    return !!(await this.storage.db
      .selectFrom('personal_access_tokens')
      .select('id')
      .where((eb) => eb.or([eb.and([eb('token_hash', '=', legacy), eb('hash_kind', '=', 'sha256')]), eb.and([eb('token_hash', '=', hmac), eb('hash_kind', '=', 'hmac')])]))
      .executeTakeFirst());
  }

  private toInfo(row: TokenRow): TokenInfo {
    const now = this.storage.now();
    return {
      id: row.id,
      user_id: row.user_id,
      name: row.name,
      token_prefix: row.token_prefix,
      scopes: this.storage.decodeJson<string[] | null>(row.scopes) ?? null,
      created_at: row.created_at,
      expires_at: row.expires_at,
      last_used_at: row.last_used_at,
      revoked_at: row.revoked_at,
      state: row.revoked_at ? 'revoked' : row.expires_at && row.expires_at <= now ? 'expired' : 'active',
    };
  }
}
