/**
 * Who acts: a signed-in user, a data API key, or a background run acting on behalf of a user.
 * Services, the audit log and rate limits take a principal, never an HTTP request, so work that
 * runs outside a request (a queued run) is authorized, audited and limited the same way.
 */

/** A user, signed in with a JWT or a personal access token. */
export interface UserPrincipal {
  readonly kind: 'user';
  readonly userId: number;
  readonly username: string;
  readonly role: string;
  readonly isPlatformAdmin: boolean;
  readonly defaultOrgId: number | null;
  /** Effective capabilities of this request (role baseline, groups, token scopes). */
  readonly capabilities: ReadonlySet<string>;
  /** `delegated`: not signed in, acted for by the platform with the user's rights of now (`kernelServices.delegation`). */
  readonly via: 'jwt' | 'pat' | 'delegated';
  /** The personal access token used, if any. */
  readonly tokenId: number | null;
  /** A scoped token's scopes; null = the owner's full permissions. */
  readonly scopes: ReadonlySet<string> | null;
}

/** A data API key (`X-API-Key`), recognized by an authenticator a plugin contributes. It belongs to one organization. */
export interface ApiKeyPrincipal {
  readonly kind: 'api_key';
  /** The key's id as its authenticator knows it; never the secret. */
  readonly keyId: string;
  readonly name: string;
  readonly orgId: number;
  /** Id of the plugin whose authenticator recognized the key (set by the kernel, not by the plugin). */
  readonly authenticator: string;
  /** What the key may do: capabilities of its organization only (platform-wide ones are never granted to a key). */
  readonly capabilities: ReadonlySet<string>;
  /** Names, defined by the authenticator, of what the key may call (e.g. an API Service's endpoints); null = all. */
  readonly allowed: ReadonlySet<string> | null;
}

/** A background run acting on behalf of the user who asked for it, with that user's capabilities. */
export interface RunPrincipal {
  readonly kind: 'run';
  readonly runId: number;
  /** The organization the run works in; null for work outside any organization. */
  readonly orgId: number | null;
  readonly onBehalfOf: { readonly userId: number; readonly username: string };
  readonly capabilities: ReadonlySet<string>;
}

export type Principal = UserPrincipal | ApiKeyPrincipal | RunPrincipal;

/**
 * Who work acts for when no request asks for it but a stored decision does (a schedule's owner,
 * whoever last saved a scenario): that user, narrowed to the scopes of the token they saved it
 * with (null: their full permissions). Background work takes it as `onBehalfOf`; the kernel
 * resolves the user's capabilities when each attempt starts, and a deactivated user fails it.
 */
export interface StoredActor {
  readonly userId: number;
  readonly scopes: readonly string[] | null;
}

/** A signed-in user as the stored actor of what they save now (a schedule, a scenario). */
export function storedActorOf(principal: UserPrincipal): StoredActor {
  return { userId: principal.userId, scopes: principal.scopes === null ? null : [...principal.scopes] };
}

/** The user a principal or a stored actor acts as; null for an API key. */
export function actingUserId(actor: Principal | StoredActor): number | null {
  return 'kind' in actor ? (actingUser(actor)?.userId ?? null) : actor.userId;
}
export type PrincipalKind = Principal['kind'];

/** A run's principal, frozen. `capabilities` are those the user had (in `orgId`) when the work was asked for, or has now. */
export function runPrincipal(run: { runId: number; orgId: number | null; onBehalfOf: { userId: number; username: string }; capabilities: Iterable<string> }): RunPrincipal {
  return Object.freeze({
    kind: 'run',
    runId: run.runId,
    orgId: run.orgId,
    onBehalfOf: Object.freeze({ userId: run.onBehalfOf.userId, username: run.onBehalfOf.username }),
    capabilities: new Set(run.capabilities),
  });
}

/**
 * The user whose permissions a principal exercises (row policies, ownership): the user, or the
 * user a run acts for; null for an API key, which belongs to an organization, not to a user.
 */
export function actingUser(principal: Principal): { userId: number; username: string } | null {
  if (principal.kind === 'user') return { userId: principal.userId, username: principal.username };
  if (principal.kind === 'run') return principal.onBehalfOf;
  return null;
}

/** A stable name of who acts, for rate-limit budgets: a run spends the budget of the user it acts for. */
export function principalKey(principal: Principal): string {
  if (principal.kind === 'api_key') return `api_key:${principal.authenticator}:${principal.keyId}`;
  return `user:${actingUser(principal)!.userId}`;
}
