import type { AuditService } from '../audit/audit-service.ts';
import type { OrganizationDirectory } from '../identity/organizations.ts';
import { problems } from '../problem.ts';
import type { Identity } from './authenticator.ts';

/**
 * Resolves the current organization (spec §5.11): `X-Org-Id` when given, else the user's default
 * organization. Members only; a platform admin may enter any organization, and that is audited.
 * A missing and a foreign organization get the same 403, so ids cannot be probed.
 */
export class Tenancy {
  constructor(
    private readonly organizations: OrganizationDirectory,
    private readonly audit: AuditService,
  ) {}

  /** The current organization; null only when none is named, the user has no default and `required` is false. */
  async resolve(identity: Identity, header: string | undefined, required: boolean): Promise<number | null> {
    const given = header?.trim();
    if (given !== undefined && given !== '') {
      if (!/^\d{1,15}$/.test(given)) throw problems.badRequest('X-Org-Id must be an integer organization id', [{ path: 'headers.x-org-id', message: 'must be an integer' }]);
      return this.enter(identity, Number(given));
    }
    if (identity.defaultOrgId !== null) {
      if (await this.organizations.isMember(identity.defaultOrgId, identity.userId)) return identity.defaultOrgId;
      // A route that is not org-scoped still works for a user who left their default organization.
      return required || identity.isPlatformAdmin ? this.admitNonMember(identity, identity.defaultOrgId) : null;
    }
    if (required) throw problems.badRequest('no organization: send X-Org-Id or set a default organization', [{ path: 'headers.x-org-id', message: 'required' }]);
    return null;
  }

  private async enter(identity: Identity, orgId: number): Promise<number> {
    if (await this.organizations.isMember(orgId, identity.userId)) return orgId;
    return this.admitNonMember(identity, orgId);
  }

  /** A platform admin may enter any existing organization (audited); anyone else is refused. */
  private async admitNonMember(identity: Identity, orgId: number): Promise<number> {
    if (identity.isPlatformAdmin && (await this.organizations.get(orgId))) {
      // The principal is not on the request yet (capabilities come after the organization): name the actor.
      await this.audit.record({ action: 'tenancy.cross_org_access', actor: { userId: identity.userId, username: identity.username }, targetType: 'organization', targetId: orgId, orgId });
      return orgId;
    }
    throw problems.forbidden(`organization ${orgId} does not exist or you are not a member`);
  }
}
