import { createSecretKey, type KeyObject } from 'node:crypto';
import { SignJWT, jwtVerify, errors as joseErrors } from 'jose';

export interface JwtSettings {
  secret: string;
  algorithm: 'HS256' | 'HS384' | 'HS512';
  expireMinutes: number;
}

/** The access-token payload of spec §2.1: group memberships are never in it. */
export interface AccessTokenClaims {
  user_id: number;
  role: string;
  exp: number;
  /** Issued at (Unix seconds); the kernel always sets it, a token made elsewhere may lack it. */
  iat: number | undefined;
}

// One key object per secret: importing the key on every request costs more than verifying.
const keys = new Map<string, KeyObject>();
function keyFor(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) keys.set(secret, (key = createSecretKey(Buffer.from(secret, 'utf8'))));
  return key;
}

export function issueAccessToken(settings: JwtSettings, user: { id: number; role: string }): Promise<string> {
  return new SignJWT({ user_id: user.id, role: user.role })
    .setProtectedHeader({ alg: settings.algorithm, typ: 'JWT' })
    .setIssuedAt()
    .setExpirationTime(`${settings.expireMinutes}m`)
    .sign(keyFor(settings.secret));
}

const VERIFIED_CACHE_SIZE = 10_000;

/**
 * Remembers tokens whose signature was already verified. A token is immutable and the secret only
 * changes with a restart, so only the expiry needs checking again; jose verifies HMAC through
 * WebCrypto on the thread pool, which costs far more than the rest of a request.
 */
export class VerifiedTokenCache {
  private readonly entries = new Map<string, AccessTokenClaims>();

  /** The claims: at once for a token verified before, else once the signature is checked. */
  verify(settings: JwtSettings, token: string): AccessTokenClaims | Promise<AccessTokenClaims> {
    const cached = this.entries.get(token);
    if (cached && cached.exp * 1000 > Date.now()) return cached;
    this.entries.delete(token);
    return verifyAccessToken(settings, token).then((claims) => {
      if (this.entries.size >= VERIFIED_CACHE_SIZE) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(token, claims);
      return claims;
    });
  }
}

/**
 * Verifies signature, expiry and algorithm. The algorithm is pinned to the configured one, so a
 * token signed with any other (or `none`) is refused, and a rotated secret refuses every old token.
 */
export async function verifyAccessToken(settings: JwtSettings, token: string): Promise<AccessTokenClaims> {
  try {
    const { payload } = await jwtVerify(token, keyFor(settings.secret), { algorithms: [settings.algorithm] });
    if (typeof payload.user_id !== 'number' || !Number.isInteger(payload.user_id) || typeof payload.role !== 'string' || typeof payload.exp !== 'number') {
      throw new Error('token payload lacks user_id, role or exp');
    }
    return { user_id: payload.user_id, role: payload.role, exp: payload.exp, iat: payload.iat };
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) throw new Error('token expired');
    if (err instanceof joseErrors.JOSEAlgNotAllowed) throw new Error('token algorithm not accepted');
    throw new Error(err instanceof joseErrors.JOSEError ? 'token signature or format invalid' : (err as Error).message);
  }
}
