import type { Storage } from '../../storage/index.ts';
import { problems } from '../problem.ts';
import type { Principal } from '../route.ts';
import type { CapabilityInfo } from '../registry/generation.ts';
import { verifyAccessToken, type JwtSettings } from './jwt.ts';

/** The legacy role that makes a user a platform administrator, holding every capability. */
export const PLATFORM_ADMIN_ROLE = 'admin';

/**
 * Resolves `Authorization: Bearer …` to the caller (spec §5): the user is looked up on every
 * request, so a deactivated user is refused at once, and capabilities are computed on the server.
 */
export class Authenticator {
  constructor(
    private readonly storage: Storage,
    private readonly jwt: JwtSettings,
  ) {}

  async authenticate(authorization: string | undefined, capabilities: ReadonlyMap<string, CapabilityInfo>): Promise<Principal> {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!match) throw problems.unauthorized('missing bearer token: send Authorization: Bearer <token>');
    let claims;
    try {
      claims = await verifyAccessToken(this.jwt, match[1]);
    } catch (err) {
      throw problems.unauthorized(`invalid token: ${(err as Error).message}`);
    }
    const user = await this.storage.db
      .selectFrom('users')
      .select(['id', 'username', 'role', 'is_active'])
      .where('id', '=', claims.user_id)
      .executeTakeFirst();
    if (!user) throw problems.unauthorized('invalid token: the user no longer exists');
    if (!user.is_active) throw problems.unauthorized('invalid token: the user is deactivated');
    const isPlatformAdmin = user.role === PLATFORM_ADMIN_ROLE;
    const granted = [...capabilities.values()].filter((c) => isPlatformAdmin || c.roles.includes(user.role)).map((c) => c.name);
    return { userId: user.id, username: user.username, role: user.role, isPlatformAdmin, capabilities: new Set(granted), via: 'jwt' };
  }
}
