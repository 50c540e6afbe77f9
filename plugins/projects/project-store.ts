import { sql } from 'kysely';
import { containsText, type Storage } from '../../storage/index.ts';
import { problems } from '../../kernel/plugin-api.ts';

export interface Project {
  id: number;
  org_id: number;
  key: string;
  name: string;
  description: string | null;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

/** Projects of one organization at a time: every read and write is filtered by `orgId`. */
export class ProjectStore {
  constructor(private readonly storage: Storage) {}

  async create(orgId: number, input: { key: string; name: string; description?: string | null }, userId: number): Promise<Project> {
    const now = this.storage.now();
    try {
      return (await this.storage.db
        .insertInto('projects')
        .values({ org_id: orgId, key: input.key, name: input.name, description: input.description ?? null, created_by: userId, created_at: now, updated_at: now })
        .returningAll()
        .executeTakeFirstOrThrow()) as Project;
    } catch (err) {
      if (this.storage.isUniqueViolation(err)) throw problems.conflict(`a project with key ${input.key} already exists in this organization`);
      throw err;
    }
  }

  async list(orgId: number, page: { limit: number; offset: number; search?: string }): Promise<{ items: Project[]; total: number }> {
    let query = this.storage.db.selectFrom('projects').where('org_id', '=', orgId);
    if (page.search) query = query.where(sql<boolean>`(${containsText(sql.ref('name'), page.search)} or ${containsText(sql.ref('key'), page.search)})`);
    const items = (await query.selectAll().orderBy('id').limit(page.limit).offset(page.offset).execute()) as Project[];
    const { total } = await query.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow();
    return { items, total: Number(total) };
  }

  async find(orgId: number, id: number): Promise<Project | undefined> {
    return (await this.storage.db.selectFrom('projects').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst()) as Project | undefined;
  }

  /** The project, if it belongs to the organization; another organization's project is "not found". */
  async get(orgId: number, id: number): Promise<Project> {
    const project = await this.find(orgId, id);
    if (!project) throw problems.notFound(`no project ${id} in this organization`);
    return project;
  }

  async update(orgId: number, id: number, changes: { name?: string; description?: string | null }): Promise<Project> {
    await this.get(orgId, id);
    return (await this.storage.db
      .updateTable('projects')
      .set({ ...changes, updated_at: this.storage.now() })
      .where('org_id', '=', orgId)
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow()) as Project;
  }

  async remove(orgId: number, id: number): Promise<Project> {
    const project = await this.get(orgId, id);
    await this.storage.db.deleteFrom('projects').where('org_id', '=', orgId).where('id', '=', id).execute();
    return project;
  }
}
