import type { IdentitySnapshot } from '../identity/identity-snapshot.ts';
import type { PersonalAccessTokens } from '../identity/tokens.ts';
import { PAT_PREFIX } from '../identity/tokens.ts';
import { PLATFORM_ADMIN_ROLE, type PublicUser } from '../identity/users.ts';
import { problems } from '../problem.ts';
import { VerifiedTokenCache, type AccessTokenClaims, type JwtSettings } from './jwt.ts';

const BEARER = /^Bearer\s+(\S+)\s*$/i;

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
  /** When the credential stops being valid (JWT `exp`, PAT expiry); null = never. */
  expiresAtMs: number | null;
  /** The user's password is temporary (`must_reset_password`): set by an admin, or the bootstrap admin's. */
  mustResetPassword: boolean;
}

/**
 * Resolves `Authorization: Bearer …` (spec §5.2): a value starting with `svc_` is a personal
 * access token, anything else a JWT. The owner and the token are read from the identity snapshot,
 * which the caller refreshes first (checked against the database's change counter), so a
 * deactivated user, a revoked token or a JWT older than a password change is refused on the very
 * next request.
 */
export class Authenticator {
  private readonly verified = new VerifiedTokenCache();
  private readonly findToken = (hmac: string) => this.snapshot.token(hmac);

  constructor(
    private readonly snapshot: IdentitySnapshot,
    private readonly jwt: JwtSettings,
    private readonly tokens: PersonalAccessTokens,
  ) {}

  async identify(authorization: string | undefined): Promise<Identity> {
    const match = BEARER.exec(authorization ?? '');
    if (!match) throw problems.unauthorized('missing bearer token: send Authorization: Bearer <token>');
    const credential = match[1];
    if (credential.startsWith(PAT_PREFIX)) {
      const resolved = await this.tokens.resolve(credential, this.findToken);
      if ('refused' in resolved) throw problems.unauthorized(`invalid token: ${resolved.refused}`);
      return identityOf(await this.snapshot.user(resolved.token.user_id), 'pat', resolved.token.id, resolved.scopes, resolved.expiresAtMs);
    }
    let claims;
    try {
      claims = await this.verified.verify(this.jwt, credential);
    } catch (err) {
      throw problems.unauthorized(`invalid token: ${(err as Error).message}`);
    }
    const user = await this.snapshot.user(claims.user_id);
    const identity = identityOf(user, 'jwt', null, null, claims.exp * 1000); // refuses a missing user first
    if (issuedBeforeSessionsEnded(claims, user!)) throw problems.unauthorized('invalid token: token issued before the password changed; sign in again');
    return identity;
  }
}

/**
 * A password change or reset ends the sessions begun before it (`sessions_valid_after`, kept to the
 * second like `iat`). Only JWTs: a personal access token outlives a password change, as on GitLab.
 */
function issuedBeforeSessionsEnded(claims: AccessTokenClaims, user: PublicUser): boolean {
  if (user.sessions_valid_after === null) return false;
  return claims.iat === undefined || claims.iat * 1000 < Date.parse(user.sessions_valid_after);
}

/** The caller a credential names, if that user still exists and is active. */
function identityOf(user: PublicUser | undefined, via: Identity['via'], tokenId: number | null, scopes: ReadonlySet<string> | null, expiresAtMs: number | null): Identity {
  if (!user) throw problems.unauthorized('invalid token: the user no longer exists');
  if (!user.is_active) throw problems.unauthorized('invalid token: the user is deactivated');
  return { userId: user.id, username: user.username, role: user.role, isPlatformAdmin: user.role === PLATFORM_ADMIN_ROLE, defaultOrgId: user.default_org_id, via, tokenId, scopes, expiresAtMs, mustResetPassword: user.must_reset_password };
}
