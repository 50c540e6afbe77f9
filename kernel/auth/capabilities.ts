import type { IdentitySnapshot } from '../identity/identity-snapshot.ts';
import type { Maybe } from '../maybe.ts';
import type { CapabilityInfo } from '../registry/generation.ts';
import type { Identity } from './authenticator.ts';

/** What capabilities are computed from: a user, and the token that narrows them (if any). */
export type CapabilityHolder = Pick<Identity, 'userId' | 'role' | 'isPlatformAdmin' | 'tokenId' | 'scopes'>;

/** Role baselines per capability catalogue: a catalogue changes only with a plugin generation. */
const baselines = new WeakMap<ReadonlyMap<string, CapabilityInfo>, Map<string, readonly string[]>>();

/** The capabilities a legacy role grants on its own (platform admins: every one). */
function baseline(role: string, isPlatformAdmin: boolean, known: ReadonlyMap<string, CapabilityInfo>): readonly string[] {
  let byRole = baselines.get(known);
  if (!byRole) baselines.set(known, (byRole = new Map()));
  const key = isPlatformAdmin ? '' : role;
  let granted = byRole.get(key);
  if (!granted) {
    granted = [...known.values()].filter((c) => isPlatformAdmin || c.roles.includes(role)).map((c) => c.name);
    byRole.set(key, granted);
  }
  return granted;
}

/**
 * A request's capabilities (spec §2.1, §5.5): the baseline of the user's legacy role (platform
 * admins: every capability) plus those of the user's groups in the current organization,
 * intersected with the token's scopes when a scoped PAT is used. Evaluated for every request
 * against the identity snapshot, which keeps the answer until groups, memberships, roles or
 * tokens change (or a plugin generation brings another catalogue).
 */
export function effectiveCapabilities(
  identity: CapabilityHolder,
  orgId: number | null,
  known: ReadonlyMap<string, CapabilityInfo>,
  snapshot: IdentitySnapshot,
): Maybe<ReadonlySet<string>> {
  return snapshot.derived(`capabilities:${identity.userId}:${orgId}:${identity.tokenId}`, known, () => computeCapabilities(identity, orgId, known, snapshot));
}

async function computeCapabilities(identity: CapabilityHolder, orgId: number | null, known: ReadonlyMap<string, CapabilityInfo>, snapshot: IdentitySnapshot): Promise<ReadonlySet<string>> {
  const granted = new Set(baseline(identity.role, identity.isPlatformAdmin, known));
  if (orgId !== null && !identity.isPlatformAdmin) {
    // A group grants what works inside its organization only (a row from before platform-wide
    // capabilities were refused to groups grants nothing more).
    for (const group of await snapshot.groupsOf(identity.userId, orgId)) for (const name of group.capabilities) if (known.get(name)?.scope !== 'platform') granted.add(name);
  }
  if (identity.scopes) for (const name of granted) if (!identity.scopes.has(name)) granted.delete(name);
  return granted;
}
