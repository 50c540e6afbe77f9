import type { Storage } from '../../storage/index.ts';
import type { PersonalAccessTokens } from '../identity/tokens.ts';
import { PAT_PREFIX } from '../identity/tokens.ts';
import { PLATFORM_ADMIN_ROLE } from '../identity/users.ts';
import { problems } from '../problem.ts';
import { VerifiedTokenCache, type JwtSettings } from './jwt.ts';


/** Who is calling, before the organization and capabilities of the request are known. */
export interface Identity {
  userId: number;
  username: string;
  role: string;
  isPlatformAdmin: boolean;
  defaultOrgId: number | null;
  via: 'jwt' | 'pat';
  /** The PAT used, if any. */
  tokenId: number | null;
  /** A scoped PAT's scopes; null = the owner's full permissions. */
  scopes: ReadonlySet<string> | null;
}

/**
 * Resolves `Authorization: Bearer …` (spec §5.2): a value starting with `svc_` is a personal
 * access token, anything else a JWT. The owner is looked up on every request, so a deactivated
 * user or a revoked token is refused on the very next request.
 */
export class Authenticator {
  private readonly verified = new VerifiedTokenCache();

  constructor(
    private readonly storage: Storage,
    private readonly jwt: JwtSettings,
    private readonly tokens: PersonalAccessTokens,
  ) {}

  async identify(authorization: string | undefined): Promise<Identity> {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (!match) throw problems.unauthorized('missing bearer token: send Authorization: Bearer <token>');
    const credential = match[1];
    if (credential.startsWith(PAT_PREFIX)) {
      const resolved = await this.tokens.resolve(credential);
      if ('refused' in resolved) throw problems.unauthorized(`invalid token: ${resolved.refused}`);
      const user = await this.activeUser(resolved.token.user_id);
      return { ...user, via: 'pat', tokenId: resolved.token.id, scopes: resolved.scopes ? new Set(resolved.scopes) : null };
    }
    let claims;
    try {
      claims = await this.verified.verify(this.jwt, credential);
    } catch (err) {
      throw problems.unauthorized(`invalid token: ${(err as Error).message}`);
    }
    return { ...(await this.activeUser(claims.user_id)), via: 'jwt', tokenId: null, scopes: null };
  }

  private async activeUser(id: number) {
    const user = await this.storage.db
      .selectFrom('users')
      .select(['id', 'username', 'role', 'is_active', 'default_org_id'])
      .where('id', '=', id)
      .executeTakeFirst();
    if (!user) throw problems.unauthorized('invalid token: the user no longer exists');
    if (!user.is_active) throw problems.unauthorized('invalid token: the user is deactivated');
    return { userId: user.id as number, username: user.username as string, role: user.role as string, isPlatformAdmin: user.role === PLATFORM_ADMIN_ROLE, defaultOrgId: user.default_org_id as number | null };
  }
}
