import type { AuditOrigin } from '../audit/audit-service.ts';
import type { RequestHeaders } from '../http/request-headers.ts';
import type { IdentitySnapshot } from '../identity/identity-snapshot.ts';
import type { PersonalAccessTokens } from '../identity/tokens.ts';
import { andThen, type Maybe } from '../maybe.ts';
import { HttpProblem, problems } from '../problem.ts';
import type { RateLimits } from '../rate-limit/rate-limits.ts';
import type { CapabilityInfo } from '../registry/generation.ts';
import type { RouteDefinition } from '../route.ts';
import type { ApiKeyAuthenticators, ApiKeyRequest } from './api-keys.ts';
import type { Authenticator, Identity } from './authenticator.ts';
import type { Principal, UserPrincipal } from './principal.ts';
import { effectiveCapabilities } from './capabilities.ts';
import type { Tenancy } from './tenancy.ts';

export interface AuthorizerDeps {
  authenticator: Authenticator;
  tenancy: Tenancy;
  identity: IdentitySnapshot;
  tokens: PersonalAccessTokens;
  /** The capability catalogue of the current plugin generation. */
  capabilities: () => ReadonlyMap<string, CapabilityInfo>;
  /** Authenticators plugins contributed for routes with `security: 'apiKey'`. */
  apiKeys: ApiKeyAuthenticators;
  rateLimits: RateLimits;
  /** Requests per minute per personal access token; 0 = unlimited. */
  patRateLimitPerMin: number;
  /** Requests per minute per data API key; 0 = unlimited. */
  apiKeyRateLimitPerMin: number;
  /** REQUIRE_PASSWORD_CHANGE: a user with a temporary password reaches only routes that allow it. */
  requirePasswordChange: boolean;
}

/** What a resolved request carries on: the caller and the organization it works in. */
export interface Authorized {
  principal: Principal;
  orgId: number | null;
}

/** An authorized user as kept for one credential and one X-Org-Id value, with the credential's expiry. */
interface Caller extends Authorized {
  principal: UserPrincipal;
  /** When the credential stops being valid (JWT `exp`, PAT expiry); null = never. */
  expiresAtMs: number | null;
  /** Refused on routes without `allowDuringPasswordChange` (REQUIRE_PASSWORD_CHANGE and a temporary password). */
  passwordChangeRequired: boolean;
}

/**
 * Answers, for a secured route, who calls, in which organization, with which capabilities — and
 * refuses what the route does not allow (401, 400/403 for the organization, 403 for a missing
 * capability, 429 for a token over its rate).
 *
 * A caller resolved once is kept in the identity snapshot under its credential and organization
 * header until identity data changes anywhere (the snapshot's change counter) or plugins bring
 * another capability catalogue; a hit costs two map lookups and an expiry check. What must happen
 * on every request still does: the credential's expiry, the PAT's `last_used_at` stamp and rate
 * limit. A platform admin's entry into a foreign organization is never kept, so each is audited.
 */
export class Authorizer {
  constructor(private readonly deps: AuthorizerDeps) {}

  /** `request`: where the request comes from, and its headers (`header`: by lower-case name). */
  authorize(route: RouteDefinition, request: AuditOrigin & ApiKeyRequest & { header: RequestHeaders }): Maybe<Authorized> {
    if (route.security === 'apiKey') return this.authorizeApiKey(route, request);
    const credential = request.header('authorization');
    const orgHeader = request.header('x-org-id');
    const scope = orgHeader === undefined ? (route.orgScoped ? 'org' : 'any') : `${route.orgScoped ? 'org' : 'any'}:${orgHeader}`;
    return andThen(this.deps.identity.refresh(), () => {
      const catalogue = this.deps.capabilities();
      const known = credential === undefined ? undefined : this.deps.identity.knownCaller<Caller>(credential, scope, catalogue);
      const now = Date.now();
      if (known && (known.expiresAtMs === null || known.expiresAtMs > now)) return this.admit(route, known, now);
      return this.resolve(route, credential, orgHeader, scope, catalogue, request).then((caller) => this.admit(route, caller, now));
    });
  }

  /** The first request with a credential in a scope: authenticate, resolve the organization, compute capabilities. */
  private async resolve(route: RouteDefinition, credential: string | undefined, orgHeader: string | undefined, scope: string, catalogue: ReadonlyMap<string, CapabilityInfo>, request: AuditOrigin): Promise<Caller> {
    const { identity: snapshot } = this.deps;
    const version = snapshot.version;
    const identity = await this.deps.authenticator.identify(credential);
    const orgId = await this.deps.tenancy.resolve(identity, orgHeader, route.orgScoped === true, request);
    const capabilities = await effectiveCapabilities(identity, orgId, catalogue, snapshot);
    const passwordChangeRequired = this.deps.requirePasswordChange && identity.mustResetPassword;
    const caller: Caller = { principal: principalOf(identity, capabilities), orgId, expiresAtMs: identity.expiresAtMs, passwordChangeRequired };
    // A member's organization only: a platform admin entering another one is audited every time.
    if (orgId === null || (await snapshot.isMember(orgId, identity.userId))) snapshot.keepCaller(credential!, scope, catalogue, caller, version);
    return caller;
  }

  /**
   * A data API key: recognized by a contributed authenticator, acting in its own organization only,
   * with the capabilities it was granted; asked of its authenticator on every request (which
   * decides what to cache: a revoked key must fail at once).
   */
  private authorizeApiKey(route: RouteDefinition, request: ApiKeyRequest & { header: RequestHeaders }): Maybe<Authorized> {
    return andThen(this.deps.apiKeys.authenticate(request, this.deps.capabilities()), (principal) => {
      const limit = this.deps.apiKeyRateLimitPerMin;
      const caller = { principal, orgId: principal.orgId };
      if (limit <= 0) return permit(route, caller);
      return this.deps.rateLimits.take(principal, { name: 'api_key', limit, windowMs: 60_000, detail: `this API key made more than ${limit} requests in a minute` }).then(() => permit(route, caller));
    });
  }

  private admit(route: RouteDefinition, caller: Caller, now: number): Maybe<Authorized> {
    if (caller.passwordChangeRequired && !route.allowDuringPasswordChange) throw passwordChangeRequired();
    const { tokenId } = caller.principal;
    if (tokenId === null) return permit(route, caller);
    const stamped = this.deps.tokens.noteUse(tokenId, now);
    const limited = this.deps.patRateLimitPerMin > 0 ? this.limitToken(tokenId) : undefined;
    if (stamped === undefined && limited === undefined) return permit(route, caller);
    return Promise.all([stamped, limited]).then(() => permit(route, caller));
  }

  private limitToken(tokenId: number): Promise<void> {
    const limit = this.deps.patRateLimitPerMin;
    return this.deps.rateLimits.takeKey(`pat:${tokenId}`, { name: 'pat', limit, windowMs: 60_000, detail: `this token made more than ${limit} requests in a minute` });
  }
}

/** The caller, if it holds the capability the route needs. */
function permit<A extends Authorized>(route: RouteDefinition, caller: A): A {
  const { principal } = caller;
  if (route.capability && !principal.capabilities.has(route.capability)) throw problems.forbidden(`this operation needs the capability "${route.capability}"${whyMissing(principal, route.capability)}`);
  return caller;
}

/**
 * A user whose password is temporary, with REQUIRE_PASSWORD_CHANGE on, whatever the credential: a
 * personal access token too, since its owner has not chosen a password yet (the token may have been
 * minted before an admin reset the password). The cached caller is dropped when the password
 * changes (identity data changed), so the next request is let through.
 */
function passwordChangeRequired(): HttpProblem {
  return new HttpProblem(403, 'your password is temporary (must_reset_password): change it before anything else', { code: 'password_change_required' });
}

/** What narrowed a capability away, when it was not the role or groups. */
function whyMissing(principal: Principal, capability: string): string {
  if (principal.kind === 'user' && principal.scopes && !principal.scopes.has(capability)) return ' (not among this token\u2019s scopes)';
  if (principal.kind === 'api_key') return ' (not granted to this API key)';
  return '';
}

/** Frozen: one principal serves every request of its caller until identity changes. */
function principalOf(identity: Identity, capabilities: ReadonlySet<string>): UserPrincipal {
  const { userId, username, role, isPlatformAdmin, defaultOrgId, via, tokenId, scopes } = identity;
  return Object.freeze({ kind: 'user', userId, username, role, isPlatformAdmin, defaultOrgId, capabilities, via, tokenId, scopes });
}
