import type { IdentitySnapshot } from '../identity/identity-snapshot.ts';
import { PLATFORM_ADMIN_ROLE } from '../identity/users.ts';
import type { CapabilityInfo } from '../registry/generation.ts';
import { effectiveCapabilities } from './capabilities.ts';
import { runPrincipal, type RunPrincipal } from './principal.ts';

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
    await this.identity.refresh();
    const user = await this.identity.user(run.userId);
    if (!user) throw new RunNotAuthorizedError(`run ${run.runId}: user ${run.userId} no longer exists`);
    if (!user.is_active) throw new RunNotAuthorizedError(`run ${run.runId}: user ${user.username} is deactivated`);
    const isPlatformAdmin = user.role === PLATFORM_ADMIN_ROLE;
    if (run.orgId !== null && !isPlatformAdmin && !(await this.identity.isMember(run.orgId, user.id))) {
      throw new RunNotAuthorizedError(`run ${run.runId}: user ${user.username} is no longer a member of organization ${run.orgId}`);
    }
    // The user's own capabilities (kept by the snapshot under the user's key), narrowed here: a
    // scoped set passed in would be kept under that same key.
    const held = await effectiveCapabilities({ userId: user.id, role: user.role, isPlatformAdmin, tokenId: null, scopes: null }, run.orgId, this.catalogue(), this.identity);
    const scopes = run.scopes == null ? null : new Set(run.scopes);
    const capabilities = scopes ? [...held].filter((name) => scopes.has(name)) : held;
    return runPrincipal({ runId: run.runId, orgId: run.orgId, onBehalfOf: { userId: user.id, username: user.username }, capabilities });
  }
}
