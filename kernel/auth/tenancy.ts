import type { Storage } from '../../storage/index.ts';
import { problems } from '../problem.ts';
import type { Principal } from '../route.ts';

/**
 * Resolves the current organization of an org-scoped request (spec §5.11): `X-Org-Id` when given,
 * else the user's default organization. Members only; platform admins may enter any organization.
 */
export class Tenancy {
  constructor(private readonly storage: Storage) {}

  async resolve(principal: Principal, header: string | undefined): Promise<number> {
    let orgId: number;
    if (header !== undefined && header !== '') {
      if (!/^\d+$/.test(header.trim())) throw problems.badRequest('X-Org-Id must be an integer organization id', [{ path: 'headers.x-org-id', message: 'must be an integer' }]);
      orgId = Number(header.trim());
    } else {
      const user = await this.storage.db.selectFrom('users').select('default_org_id').where('id', '=', principal.userId).executeTakeFirst();
      if (user?.default_org_id == null) throw problems.badRequest('no organization: send X-Org-Id or set a default organization', [{ path: 'headers.x-org-id', message: 'required' }]);
      orgId = user.default_org_id;
    }
    const org = await this.storage.db.selectFrom('organizations').select('id').where('id', '=', orgId).executeTakeFirst();
    if (!org) throw problems.forbidden(`organization ${orgId} does not exist or you are not a member`);
    if (principal.isPlatformAdmin) return orgId;
    const member = await this.storage.db
      .selectFrom('organization_members')
      .select('user_id')
      .where('org_id', '=', orgId)
      .where('user_id', '=', principal.userId)
      .executeTakeFirst();
    if (!member) throw problems.forbidden(`organization ${orgId} does not exist or you are not a member`);
    return orgId;
  }
}
