import type { GroupDirectory } from '../identity/groups.ts';
import type { CapabilityInfo } from '../registry/generation.ts';
import type { Identity } from './authenticator.ts';

/**
 * A request's capabilities (spec §2.1, §5.5): the baseline of the user's legacy role (platform
 * admins: every capability) plus those of the user's groups in the current organization,
 * intersected with the token's scopes when a scoped PAT is used. Computed on every request.
 */
export async function effectiveCapabilities(
  identity: Identity,
  orgId: number | null,
  known: ReadonlyMap<string, CapabilityInfo>,
  groups: GroupDirectory,
): Promise<Set<string>> {
  const granted = new Set<string>();
  for (const capability of known.values()) {
    if (identity.isPlatformAdmin || capability.roles.includes(identity.role)) granted.add(capability.name);
  }
  if (orgId !== null && !identity.isPlatformAdmin) for (const name of await groups.capabilitiesOf(identity.userId, orgId)) granted.add(name);
  if (identity.scopes) for (const name of granted) if (!identity.scopes.has(name)) granted.delete(name);
  return granted;
}
