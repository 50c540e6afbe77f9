import type { IdentitySnapshot } from '../identity/identity-snapshot.ts';
import { andThen, type Maybe } from '../maybe.ts';
import { PLATFORM_ADMIN_ROLE } from '../identity/users.ts';
import type { CapabilityInfo } from '../registry/generation.ts';
import { effectiveCapabilities } from './capabilities.ts';
import { runPrincipal, type RunPrincipal, type UserPrincipal } from './principal.ts';

/** A user's rights in an organization as of now. */
export interface UserRights {
  user: { userId: number; username: string; role: string; isPlatformAdmin: boolean; defaultOrgId: number | null };
  capabilities: ReadonlySet<string>;
}

/** The user's capabilities narrowed to `scopes` (a scoped token's, recorded when the work was asked for); null or absent: all of them. */
function narrowed(rights: UserRights, scopes: Iterable<string> | null | undefined): { capabilities: ReadonlySet<string>; scopes: ReadonlySet<string> | null } {
  if (scopes == null) return { capabilities: rights.capabilities, scopes: null };
  const kept = new Set(scopes);
  return { capabilities: new Set([...rights.capabilities].filter((name) => kept.has(name))), scopes: kept };
}

/** Why a run may not act for its user any more; the run should end (failed), not retry. */
export class RunNotAuthorizedError extends Error {}

/**
 * The principals of background runs, resolved when a run starts rather than trusted from when it
 * was asked for: the user must still exist, be active and (platform admins aside) belong to the
 * run's organization, and the run gets the capabilities the user has there now — narrowed to the
 * `scopes` recorded at enqueue (a scoped token's) when there were any.
 */
export class RunPrincipals {
  constructor(
    private readonly identity: IdentitySnapshot,
    private readonly catalogue: () => ReadonlyMap<string, CapabilityInfo>,
  ) {}

  async forRun(run: { runId: number; orgId: number | null; userId: number; scopes?: Iterable<string> | null }): Promise<RunPrincipal> {
    const rights = await this.rightsOf(run.userId, run.orgId);
    if ('refused' in rights) throw new RunNotAuthorizedError(`run ${run.runId}: ${rights.refused}`);
    const { capabilities } = narrowed(rights, run.scopes);
    return runPrincipal({ runId: run.runId, orgId: run.orgId, onBehalfOf: { userId: rights.user.userId, username: rights.user.username }, capabilities });
  }

  /**
   * `Delegation.actFor`: a principal with the user's rights of now in the organization, narrowed to
   * `scopes` when given, or the refusal. Kept in the identity snapshot until identity changes (one
   * frozen principal per user, organization and scopes), so a caller acting for the same user on
   * every request (an API Service's publisher) reads it from memory.
   */
  actFor(userId: number, orgId: number, scopes?: Iterable<string> | null): Maybe<UserPrincipal | { refused: string }> {
    const scopeList = scopes == null ? null : [...scopes];
    return andThen(this.identity.refresh(), () =>
      this.identity.derived(`act-for:${userId}:${orgId}:${scopeList === null ? '*' : JSON.stringify(scopeList)}`, this.catalogue(), async () => {
        const rights = await this.rightsOf(userId, orgId);
        if ('refused' in rights) return rights;
        return Object.freeze({ kind: 'user', ...rights.user, ...narrowed(rights, scopeList), via: 'delegated', tokenId: null }) as UserPrincipal;
      }),
    );
  }

  /**
   * What the user may do in the organization now (null: outside any), or why the user may not act
   * there at all: removed, deactivated, or (platform admins aside) no longer a member.
   */
  async rightsOf(userId: number, orgId: number | null): Promise<UserRights | { refused: string }> {
    await this.identity.refresh();
    const user = await this.identity.user(userId);
    if (!user) return { refused: `user ${userId} no longer exists` };
    if (!user.is_active) return { refused: `user ${user.username} is deactivated` };
    const isPlatformAdmin = user.role === PLATFORM_ADMIN_ROLE;
    if (orgId !== null && !isPlatformAdmin && !(await this.identity.isMember(orgId, user.id))) {
      return { refused: `user ${user.username} is no longer a member of organization ${orgId}` };
    }
    // The user's own capabilities (kept by the snapshot under the user's key), narrowed by callers:
    // a scoped set passed in would be kept under that same key.
    const capabilities = await effectiveCapabilities({ userId: user.id, role: user.role, isPlatformAdmin, tokenId: null, scopes: null }, orgId, this.catalogue(), this.identity);
    return { user: { userId: user.id, username: user.username, role: user.role, isPlatformAdmin, defaultOrgId: user.default_org_id }, capabilities };
  }
}
