import type { Storage } from '../../storage/index.ts';
import { problems } from '../problem.ts';

export interface Organization {
  id: number;
  name: string;
  created_at: string;
}

/** Organizations (tenants) and who belongs to them. */
export class OrganizationDirectory {
  constructor(private readonly storage: Storage) {}

  async create(name: string, creatorId: number): Promise<Organization> {
    const now = this.storage.now();
    return this.storage.transaction(async (trx) => {
      const org = (await trx.insertInto('organizations').values({ name, created_at: now }).returningAll().executeTakeFirstOrThrow()) as Organization;
      await trx.insertInto('organization_members').values({ org_id: org.id, user_id: creatorId, created_at: now }).execute();
      return org;
    });
  }

  async get(id: number): Promise<Organization | undefined> {
    return (await this.storage.db.selectFrom('organizations').selectAll().where('id', '=', id).executeTakeFirst()) as Organization | undefined;
  }

  /** Every organization (platform admins), or those the user belongs to. */
  async list(userId: number | null): Promise<Organization[]> {
    let query = this.storage.db.selectFrom('organizations').selectAll('organizations').orderBy('organizations.id');
    if (userId !== null) query = query.innerJoin('organization_members as m', 'm.org_id', 'organizations.id').where('m.user_id', '=', userId);
    return (await query.execute()) as Organization[];
  }

  async isMember(orgId: number, userId: number): Promise<boolean> {
    return !!(await this.storage.db.selectFrom('organization_members').select('user_id').where('org_id', '=', orgId).where('user_id', '=', userId).executeTakeFirst());
  }

  async members(orgId: number): Promise<{ user_id: number; username: string; email: string; role: string; joined_at: string }[]> {
    return (await this.storage.db
      .selectFrom('organization_members as m')
      .innerJoin('users as u', 'u.id', 'm.user_id')
      .select(['u.id as user_id', 'u.username', 'u.email', 'u.role', 'm.created_at as joined_at'])
      .where('m.org_id', '=', orgId)
      .orderBy('u.id')
      .execute()) as { user_id: number; username: string; email: string; role: string; joined_at: string }[];
  }

  /**
   * Adds a user to an organization. `homeOnly` (everyone but platform admins) admits only users
   * whose home organization (`default_org_id`) it is; any other id — another organization's user
   * or no user at all — gets the very same 404, so ids cannot be probed.
   */
  async addMember(orgId: number, userId: number, { homeOnly }: { homeOnly: boolean }): Promise<void> {
    const user = await this.storage.db.selectFrom('users').select(['id', 'default_org_id']).where('id', '=', userId).executeTakeFirst();
    if (homeOnly && user?.default_org_id !== orgId) throw problems.notFound(`no user ${userId} whose home organization is ${orgId}; only a platform admin adds users of other organizations`);
    if (!user) throw problems.notFound(`no user ${userId}`);
    if (await this.isMember(orgId, userId)) throw problems.conflict(`user ${userId} is already a member of organization ${orgId}`);
    await this.storage.db.insertInto('organization_members').values({ org_id: orgId, user_id: userId, created_at: this.storage.now() }).execute();
  }

  /** Removes the membership and, with it, the user's groups of that organization. */
  async removeMember(orgId: number, userId: number): Promise<void> {
    await this.storage.transaction(async (trx) => {
      const removed = await trx.deleteFrom('organization_members').where('org_id', '=', orgId).where('user_id', '=', userId).executeTakeFirst();
      if (Number(removed.numDeletedRows) === 0) throw problems.notFound(`user ${userId} is not a member of organization ${orgId}`);
      await trx
        .deleteFrom('group_members')
        .where('user_id', '=', userId)
        .where('group_id', 'in', trx.selectFrom('groups').select('id').where('org_id', '=', orgId))
        .execute();
    });
  }
}
