import type { AuditOrigin, AuditService } from '../audit/audit-service.ts';
import type { IdentitySnapshot } from '../identity/identity-snapshot.ts';
import type { OrganizationDirectory } from '../identity/organizations.ts';
import { problems } from '../problem.ts';
import { andThen, type Maybe } from '../maybe.ts';
import type { Identity } from './authenticator.ts';

const ORG_ID = /^\d{1,15}$/;

/**
 * Resolves the current organization (spec §5.11): `X-Org-Id` when given, else the user's default
 * organization. Members only; a platform admin may enter any organization, and that is audited.
 * A missing and a foreign organization get the same 403, so ids cannot be probed.
 */
export class Tenancy {
  constructor(
    private readonly snapshot: IdentitySnapshot,
    private readonly organizations: OrganizationDirectory,
    private readonly audit: AuditService,
  ) {}

  /** The current organization; null only when none is named, the user has no default and `required` is false. */
  resolve(identity: Identity, header: string | undefined, required: boolean, request: AuditOrigin): Maybe<number | null> {
    const given = header?.trim();
    if (given !== undefined && given !== '') {
      if (!ORG_ID.test(given)) throw problems.badRequest('X-Org-Id must be an integer organization id', [{ path: 'headers.x-org-id', message: 'must be an integer' }]);
      const orgId = Number(given);
      return andThen(this.snapshot.isMember(orgId, identity.userId), (member) => (member ? orgId : this.admitNonMember(identity, orgId, request)));
    }
    const defaultOrgId = identity.defaultOrgId;
    if (defaultOrgId !== null) {
      return andThen(this.snapshot.isMember(defaultOrgId, identity.userId), (member) => {
        if (member) return defaultOrgId;
        // A route that is not org-scoped still works for a user who left their default organization.
        return required || identity.isPlatformAdmin ? this.admitNonMember(identity, defaultOrgId, request) : null;
      });
    }
    if (required) throw problems.badRequest('no organization: send X-Org-Id or set a default organization', [{ path: 'headers.x-org-id', message: 'required' }]);
    return null;
  }

  /** A platform admin may enter any existing organization (audited); anyone else is refused. */
  private async admitNonMember(identity: Identity, orgId: number, request: AuditOrigin): Promise<number> {
    if (identity.isPlatformAdmin && (await this.organizations.get(orgId))) {
      // The principal is not on the request yet (capabilities come after the organization): name the actor.
      await this.audit.record({ security: true, action: 'tenancy.cross_org_access', actor: { userId: identity.userId, username: identity.username }, targetType: 'organization', targetId: orgId, orgId }, request);
      return orgId;
    }
    throw problems.forbidden(`organization ${orgId} does not exist or you are not a member`);
  }
}
