import type { Logger } from 'pino';
import type { Storage } from '../storage/index.ts';
import { hashPassword, randomPassword } from './auth/password.ts';
import { PLATFORM_ADMIN_ROLE } from './identity/users.ts';
import type { Settings } from './config.ts';

/**
 * On an empty database: organization 1 and a platform admin. The admin's credentials come from
 * `ADMIN_USERNAME` / `ADMIN_PASSWORD` / `ADMIN_EMAIL`; without a password a random one is printed
 * once (to the console, never the log) and must be changed at first login.
 */
export async function bootstrapAdmin(storage: Storage, settings: Settings, logger: Logger, print: (line: string) => void): Promise<void> {
  const anyUser = await storage.db.selectFrom('users').select('id').limit(1).executeTakeFirst();
  if (anyUser) return;
  const password = settings.ADMIN_PASSWORD ?? randomPassword();
  const passwordHash = await hashPassword(password);
  await storage.transaction(async (trx) => {
    const now = storage.now();
    const org = await trx.insertInto('organizations').values({ name: 'Default organization', created_at: now }).returning('id').executeTakeFirstOrThrow();
    const user = await trx
      .insertInto('users')
      .values({
        username: settings.ADMIN_USERNAME,
        email: settings.ADMIN_EMAIL.toLowerCase(), // the users directory stores and looks e-mails up lower-cased
        password_hash: passwordHash,
        role: PLATFORM_ADMIN_ROLE,
        default_org_id: org.id,
        must_reset_password: !settings.ADMIN_PASSWORD,
        is_active: true,
        created_at: now,
        updated_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await trx.insertInto('organization_members').values({ org_id: org.id, user_id: user.id, created_at: now }).execute();
  });
  logger.info({ username: settings.ADMIN_USERNAME }, 'bootstrapped organization 1 and the platform admin');
  if (!settings.ADMIN_PASSWORD) {
    print(`Platform admin "${settings.ADMIN_USERNAME}" created with the one-time password: ${password}  (you must change it at first login)`);
  }
}
