import type { Storage } from '../../storage/index.ts';
import { problems } from '../problem.ts';

export interface Group {
  id: number;
  org_id: number;
  name: string;
  description: string | null;
  capabilities: string[];
  created_at: string;
}

/** Groups of an organization, the capabilities they carry and their members. */
export class GroupDirectory {
  constructor(private readonly storage: Storage) {}

  /** Capabilities the user holds through groups of the organization. */
  async capabilitiesOf(userId: number, orgId: number): Promise<string[]> {
    const rows = await this.storage.db
      .selectFrom('group_members as gm')
      .innerJoin('groups as g', 'g.id', 'gm.group_id')
      .innerJoin('group_capabilities as gc', 'gc.group_id', 'g.id')
      .select('gc.capability')
      .distinct()
      .where('gm.user_id', '=', userId)
      .where('g.org_id', '=', orgId)
      .execute();
    return rows.map((r) => r.capability as string);
  }

  async create(orgId: number, input: { name: string; description?: string | null; capabilities: string[] }): Promise<Group> {
    try {
      return await this.storage.transaction(async (trx) => {
        const row = await trx
          .insertInto('groups')
          .values({ org_id: orgId, name: input.name, description: input.description ?? null, created_at: this.storage.now() })
          .returningAll()
          .executeTakeFirstOrThrow();
        const capabilities = [...new Set(input.capabilities)].sort();
        if (capabilities.length) await trx.insertInto('group_capabilities').values(capabilities.map((capability) => ({ group_id: row.id, capability }))).execute();
        return { ...(row as Omit<Group, 'capabilities'>), capabilities };
      });
    } catch (err) {
      if (this.storage.isUniqueViolation(err)) throw problems.conflict(`a group named "${input.name}" already exists in this organization`);
      throw err;
    }
  }

  /** Groups of the organization; with `memberId`, only those that user belongs to. */
  async list(orgId: number, memberId?: number): Promise<Group[]> {
    let query = this.storage.db.selectFrom('groups').selectAll('groups').where('org_id', '=', orgId).orderBy('groups.id');
    if (memberId !== undefined) query = query.innerJoin('group_members as gm', 'gm.group_id', 'groups.id').where('gm.user_id', '=', memberId);
    const groups = await query.execute();
    const capabilities = await this.storage.db
      .selectFrom('group_capabilities as gc')
      .innerJoin('groups as g', 'g.id', 'gc.group_id')
      .select(['gc.group_id', 'gc.capability'])
      .where('g.org_id', '=', orgId)
      .orderBy('gc.capability')
      .execute();
    return groups.map((g) => ({ ...(g as Omit<Group, 'capabilities'>), capabilities: capabilities.filter((c) => c.group_id === g.id).map((c) => c.capability as string) }));
  }

  /** The group, if it belongs to the organization: another organization's group is "not found". */
  async get(orgId: number, id: number): Promise<Group> {
    const group = (await this.list(orgId)).find((g) => g.id === id);
    if (!group) throw problems.notFound(`no group ${id} in this organization`);
    return group;
  }

  async update(orgId: number, id: number, changes: { name?: string; description?: string | null; capabilities?: string[] }): Promise<Group> {
    await this.get(orgId, id);
    try {
      await this.storage.transaction(async (trx) => {
        const { capabilities, ...fields } = changes;
        if (Object.keys(fields).length) await trx.updateTable('groups').set(fields).where('id', '=', id).execute();
        if (capabilities) {
          await trx.deleteFrom('group_capabilities').where('group_id', '=', id).execute();
          const unique = [...new Set(capabilities)];
          if (unique.length) await trx.insertInto('group_capabilities').values(unique.map((capability) => ({ group_id: id, capability }))).execute();
        }
      });
    } catch (err) {
      if (this.storage.isUniqueViolation(err)) throw problems.conflict(`a group named "${changes.name}" already exists in this organization`);
      throw err;
    }
    return this.get(orgId, id);
  }

  async remove(orgId: number, id: number): Promise<void> {
    await this.get(orgId, id);
    await this.storage.db.deleteFrom('groups').where('id', '=', id).execute();
  }

  async members(orgId: number, id: number): Promise<{ user_id: number; username: string }[]> {
    await this.get(orgId, id);
    return (await this.storage.db
      .selectFrom('group_members as gm')
      .innerJoin('users as u', 'u.id', 'gm.user_id')
      .select(['u.id as user_id', 'u.username'])
      .where('gm.group_id', '=', id)
      .orderBy('u.id')
      .execute()) as { user_id: number; username: string }[];
  }

  /** Adds a member; only members of the group's organization may join it. */
  async addMember(orgId: number, id: number, userId: number): Promise<void> {
    await this.get(orgId, id);
    const member = await this.storage.db.selectFrom('organization_members').select('user_id').where('org_id', '=', orgId).where('user_id', '=', userId).executeTakeFirst();
    if (!member) throw problems.unprocessable(`user ${userId} is not a member of this organization`, [{ path: 'body.user_id', message: 'not a member of the organization' }]);
    const existing = await this.storage.db.selectFrom('group_members').select('user_id').where('group_id', '=', id).where('user_id', '=', userId).executeTakeFirst();
    if (existing) throw problems.conflict(`user ${userId} is already in group ${id}`);
    await this.storage.db.insertInto('group_members').values({ group_id: id, user_id: userId, created_at: this.storage.now() }).execute();
  }

  async removeMember(orgId: number, id: number, userId: number): Promise<void> {
    await this.get(orgId, id);
    const removed = await this.storage.db.deleteFrom('group_members').where('group_id', '=', id).where('user_id', '=', userId).executeTakeFirst();
    if (Number(removed.numDeletedRows) === 0) throw problems.notFound(`user ${userId} is not in group ${id}`);
  }
}
