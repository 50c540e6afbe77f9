import crypto from 'node:crypto';
import { createRemoteJWKSet, jwtVerify, errors as joseErrors } from 'jose';
import type { AuditEvent, RequestAudit } from '../audit/audit-service.ts';
import { issueAccessToken, type JwtSettings } from '../auth/jwt.ts';
import { hashPassword, verifyPassword } from '../auth/password.ts';
import { problems } from '../problem.ts';
import type { UserDirectory, UserRow } from './users.ts';

export interface AccessTokenAnswer {
  access_token: string;
  token_type: 'bearer';
  expires_in: number;
  must_reset_password: boolean;
}

export interface IdentityProviderSettings {
  clientId: string | undefined;
  allowedDomains: readonly string[];
  jwksUrl: string;
  issuers: readonly string[];
}

/**
 * Sign-in (spec §5.3): username or e-mail with a password, or an identity provider's ID token
 * exchanged for a JWT. Every outcome is audited; a failure never says which half was wrong.
 */
export class SessionService {
  private readonly jwks: ReturnType<typeof createRemoteJWKSet>;
  private readonly markerKey: Buffer;
  private dummyHash: Promise<string> | undefined;

  constructor(
    private readonly users: UserDirectory,
    private readonly jwt: JwtSettings,
    private readonly idp: IdentityProviderSettings,
  ) {
    this.jwks = createRemoteJWKSet(new URL(idp.jwksUrl));
    // A key of its own, derived from the server secret: the marker is an HMAC of text anyone may
    // type, and must never be a (partial) signature under the JWT signing key itself.
    this.markerKey = crypto.createHmac('sha256', jwt.secret).update('audit: unknown login marker').digest();
  }

  async issue(user: Pick<UserRow, 'id' | 'role' | 'must_reset_password'>): Promise<AccessTokenAnswer> {
    return {
      access_token: await issueAccessToken(this.jwt, user),
      token_type: 'bearer',
      expires_in: this.jwt.expireMinutes * 60,
      must_reset_password: user.must_reset_password,
    };
  }

  /** Signs a user in by username (or e-mail) and password; both outcomes go to the request's audit. */
  async login(login: string, password: string, audit: RequestAudit): Promise<AccessTokenAnswer> {
    const user = await this.users.findByLogin(login);
    const valid = user ? await this.users.checkPassword(user, password) : await this.checkAgainstDummy(password);
    if (!user || !valid || !user.is_active) {
      await audit.record(user ? this.refusedAccount(user, valid) : this.refusedUnknown(login));
      throw problems.unauthorized('invalid username or password');
    }
    await audit.record({ action: 'auth.login', actor: { userId: user.id, username: user.username }, targetType: 'user', targetId: user.id, orgId: user.default_org_id });
    return this.issue(user);
  }

  /**
   * An unknown login costs one scrypt check like a known one, against a hash made once with the
   * same parameters, so the answer's timing does not tell which usernames exist. Never matches.
   */
  private async checkAgainstDummy(password: string): Promise<false> {
    this.dummyHash ??= hashPassword(crypto.randomBytes(32).toString('base64url'));
    await verifyPassword(password, await this.dummyHash);
    return false;
  }

  private refusedAccount(user: UserRow, passwordValid: boolean): AuditEvent {
    const reason = passwordValid ? 'user deactivated' : 'wrong password';
    return { security: true, action: 'auth.login', outcome: 'failure', actor: { userId: user.id, username: user.username }, details: { reason } };
  }

  /**
   * What the caller typed as a username is not kept when it names no account: it may be a password
   * typed into the wrong box. A short keyed hash of it still lets repeated attempts be correlated.
   */
  private refusedUnknown(login: string): AuditEvent {
    const marker = crypto.createHmac('sha256', this.markerKey).update(login).digest('hex').slice(0, 12);
    return { security: true, action: 'auth.login', outcome: 'failure', actor: { userId: null, username: null }, details: { reason: 'unknown user', login_marker: marker } };
  }

  /** Verifies an ID token (signature, issuer, audience, an `exp` present and not passed, verified e-mail, domain) and signs the user in. */
  async exchangeIdToken(idToken: string, audit: RequestAudit): Promise<AccessTokenAnswer> {
    const refuse = async (reason: string, email?: string) => {
      await audit.record({ security: true, action: 'auth.google', outcome: 'failure', actor: { userId: null, username: email ?? null }, details: { reason } });
      return problems.unauthorized(`identity provider token refused: ${reason}`);
    };
    if (!this.idp.clientId) throw await refuse('sign-in with the identity provider is not configured (IDP_CLIENT_ID)');
    let claims;
    try {
      ({ payload: claims } = await jwtVerify(idToken, this.jwks, { audience: this.idp.clientId, issuer: [...this.idp.issuers], requiredClaims: ['exp'] }));
    } catch (err) {
      throw await refuse(describeJoseError(err));
    }
    const email = typeof claims.email === 'string' ? claims.email.toLowerCase() : undefined;
    if (!email) throw await refuse('the token carries no e-mail');
    if (claims.email_verified !== true && claims.email_verified !== 'true') throw await refuse('the e-mail is not verified', email);
    const domain = email.split('@')[1];
    if (!this.idp.allowedDomains.map((d) => d.toLowerCase()).includes(domain)) throw await refuse(`e-mail domain ${domain} is not allowed (IDP_ALLOWED_DOMAINS)`, email);
    const user = await this.users.findByEmail(email);
    if (!user) throw await refuse('no user has this e-mail', email);
    if (!user.is_active) throw await refuse('the user is deactivated', email);
    await audit.record({ action: 'auth.google', actor: { userId: user.id, username: user.username }, targetType: 'user', targetId: user.id, orgId: user.default_org_id });
    return this.issue(user);
  }
}

function describeJoseError(err: unknown): string {
  if (err instanceof joseErrors.JWTExpired) return 'expired';
  if (err instanceof joseErrors.JWTClaimValidationFailed && err.reason === 'missing') return `claim ${err.claim} missing`;
  if (err instanceof joseErrors.JWTClaimValidationFailed) return `claim ${err.claim} invalid (${err.reason === 'check_failed' ? 'unexpected value' : err.reason})`;
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) return 'bad signature';
  if (err instanceof joseErrors.JWKSNoMatchingKey) return 'no published key matches the token (bad signature)';
  if (err instanceof joseErrors.JOSEError) return `invalid token (${err.code})`;
  return `the provider's keys could not be fetched: ${(err as Error).message}`;
}
