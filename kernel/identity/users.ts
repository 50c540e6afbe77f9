import type { Storage } from '../../storage/index.ts';
import { hashPassword, verifyPassword } from '../auth/password.ts';
import { problems } from '../problem.ts';

export const ROLES = ['admin', 'editor', 'viewer', 'management', 'cs_staff'] as const;

/** The legacy role that makes a user a platform administrator, holding every capability. */
export const PLATFORM_ADMIN_ROLE = 'admin';
export type Role = (typeof ROLES)[number];

/** A user as the API shows it: never a hash. */
export interface PublicUser {
  user_id: number;
  id: number;
  username: string;
  email: string;
  role: string;
  default_org_id: number | null;
  must_reset_password: boolean;
  is_active: boolean;
  /** JWTs issued before this moment are refused; set when the password changes or is reset. */
  sessions_valid_after: string | null;
  created_at: string;
  updated_at: string;
}

export interface UserRow {
  id: number;
  username: string;
  email: string;
  password_hash: string;
  role: string;
  default_org_id: number | null;
  must_reset_password: boolean;
  is_active: boolean;
  sessions_valid_after: string | null;
  created_at: string;
  updated_at: string;
  reset_token_hash: string | null;
  reset_token_expires_at: string | null;
}

export function toPublicUser(row: UserRow): PublicUser {
  return {
    user_id: row.id,
    id: row.id,
    username: row.username,
    email: row.email,
    role: row.role,
    default_org_id: row.default_org_id,
    must_reset_password: row.must_reset_password,
    is_active: row.is_active,
    sessions_valid_after: row.sessions_valid_after,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/**
 * Now, truncated to the second: a JWT's `iat` has one-second resolution, so a token issued after this
 * (such as the one a password change answers with) has `iat` >= it even within the same second.
 */
function currentSecond(): string {
  return new Date(Math.floor(Date.now() / 1000) * 1000).toISOString();
}

/** Accounts: the `users` table and the rules around it. */
export class UserDirectory {
  constructor(private readonly storage: Storage) {}

  async create(input: { username: string; email: string; role: string; password: string; defaultOrgId: number | null; mustResetPassword: boolean }): Promise<UserRow> {
    const now = this.storage.now();
    const passwordHash = await hashPassword(input.password);
    try {
      return await this.storage.transaction(async (trx) => {
        const user = (await trx
          .insertInto('users')
          .values({
            username: input.username,
            email: input.email.toLowerCase(),
            password_hash: passwordHash,
            role: input.role,
            default_org_id: input.defaultOrgId,
            must_reset_password: input.mustResetPassword,
            is_active: true,
            created_at: now,
            updated_at: now,
          })
          .returningAll()
          .executeTakeFirstOrThrow()) as UserRow;
        if (input.defaultOrgId !== null) {
          await trx.insertInto('organization_members').values({ org_id: input.defaultOrgId, user_id: user.id, created_at: now }).execute();
        }
        return user;
      });
    } catch (err) {
      if (this.storage.isUniqueViolation(err)) throw problems.conflict('a user with this username or e-mail already exists');
      throw err;
    }
  }

  async get(id: number): Promise<UserRow | undefined> {
    return (await this.storage.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst()) as UserRow | undefined;
  }

  async require(id: number): Promise<UserRow> {
    const user = await this.get(id);
    if (!user) throw problems.notFound(`no user ${id}`);
    return user;
  }

  /** Login accepts the username or the e-mail address. */
  async findByLogin(login: string): Promise<UserRow | undefined> {
    return (await this.storage.db
      .selectFrom('users')
      .selectAll()
      .where((eb) => eb.or([eb('username', '=', login), eb('email', '=', login.toLowerCase())]))
      .executeTakeFirst()) as UserRow | undefined;
  }

  async findByEmail(email: string): Promise<UserRow | undefined> {
    return (await this.storage.db.selectFrom('users').selectAll().where('email', '=', email.toLowerCase()).executeTakeFirst()) as UserRow | undefined;
  }

  async list(page: { limit: number; offset: number }): Promise<{ items: UserRow[]; total: number }> {
    const items = (await this.storage.db.selectFrom('users').selectAll().orderBy('id').limit(page.limit).offset(page.offset).execute()) as UserRow[];
    const { total } = await this.storage.db.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow();
    return { items, total: Number(total) };
  }

  async update(id: number, changes: { role?: string; email?: string; default_org_id?: number | null; is_active?: boolean }): Promise<UserRow> {
    const now = this.storage.now();
    const values = { ...changes, ...(changes.email ? { email: changes.email.toLowerCase() } : {}), updated_at: now };
    try {
      return await this.storage.transaction(async (trx) => {
        const row = await trx.updateTable('users').set(values).where('id', '=', id).returningAll().executeTakeFirst();
        if (!row) throw problems.notFound(`no user ${id}`);
        // A default organization the user does not belong to would lock them out of it: join it.
        if (changes.default_org_id != null) {
          await trx
            .insertInto('organization_members')
            .values({ org_id: changes.default_org_id, user_id: id, created_at: now })
            .onConflict((oc) => oc.columns(['org_id', 'user_id']).doNothing())
            .execute();
        }
        return row as UserRow;
      });
    } catch (err) {
      if (this.storage.isUniqueViolation(err)) throw problems.conflict('another user already has this e-mail');
      throw err;
    }
  }

  /**
   * Sets a new password; `mustReset` marks it temporary. Clears any pending reset token, and ends
   * every session: JWTs issued before now are refused from the next request on (PATs live on).
   */
  async setPassword(id: number, password: string, mustReset: boolean): Promise<void> {
    const passwordHash = await hashPassword(password);
    await this.storage.db
      .updateTable('users')
      .set({
        password_hash: passwordHash,
        must_reset_password: mustReset,
        reset_token_hash: null,
        reset_token_expires_at: null,
        sessions_valid_after: currentSecond(),
        updated_at: this.storage.now(),
      })
      .where('id', '=', id)
      .execute();
  }

  async checkPassword(user: UserRow, password: string): Promise<boolean> {
    return verifyPassword(password, user.password_hash);
  }

  async setResetToken(id: number, tokenHash: string, expiresAt: string): Promise<void> {
    await this.storage.db.updateTable('users').set({ reset_token_hash: tokenHash, reset_token_expires_at: expiresAt }).where('id', '=', id).execute();
  }

  /** The active user holding this unexpired reset token, without redeeming it. */
  async findByResetToken(tokenHash: string): Promise<UserRow | undefined> {
    return (await this.storage.db
      .selectFrom('users')
      .selectAll()
      .where('reset_token_hash', '=', tokenHash)
      .where('reset_token_expires_at', '>', this.storage.now())
      .where('is_active', '=', true)
      .executeTakeFirst()) as UserRow | undefined;
  }

  /**
   * Redeems a reset token: the user whose unexpired token hash matches, with the token cleared in
   * the same statement so it can be used once only.
   */
  async consumeResetToken(tokenHash: string): Promise<UserRow | undefined> {
    const now = this.storage.now();
    const row = await this.storage.db
      .updateTable('users')
      .set({ reset_token_hash: null, reset_token_expires_at: null })
      .where('reset_token_hash', '=', tokenHash)
      .where('reset_token_expires_at', '>', now)
      .where('is_active', '=', true)
      .returningAll()
      .executeTakeFirst();
    return row as UserRow | undefined;
  }
}
