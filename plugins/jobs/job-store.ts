import { problems } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { BuildMode } from '../pipeline/public.ts';

export interface Job {
  id: number;
  org_id: number;
  project_id: number;
  name: string;
  targets: number[];
  mode: BuildMode;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

export type JobFields = Pick<Job, 'project_id' | 'name' | 'targets' | 'mode'>;

/** Jobs of one organization at a time. */
export class JobStore {
  constructor(private readonly storage: Storage) {}

  private decode(row: Record<string, any>): Job {
    return { ...(row as Job), id: Number(row.id), org_id: Number(row.org_id), project_id: Number(row.project_id), targets: this.storage.decodeJson<number[]>(row.targets), created_by: row.created_by === null ? null : Number(row.created_by) };
  }

  async create(orgId: number, fields: JobFields, userId: number | null): Promise<Job> {
    const now = this.storage.now();
    return this.conflictIfNamed(orgId, fields, async () => {
      const row = await this.storage.db
        .insertInto('jobs')
        .values({ org_id: orgId, project_id: fields.project_id, name: fields.name, targets: this.storage.encodeJson(fields.targets), mode: fields.mode, created_by: userId, created_at: now, updated_at: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      return this.decode(row);
    });
  }

  async list(orgId: number, projectId?: number): Promise<Job[]> {
    let query = this.storage.db.selectFrom('jobs').selectAll().where('org_id', '=', orgId);
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    return (await query.orderBy('id').execute()).map((r) => this.decode(r));
  }

  async find(orgId: number, id: number): Promise<Job | undefined> {
    const row = await this.storage.db.selectFrom('jobs').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    return row && this.decode(row);
  }

  async get(orgId: number, id: number): Promise<Job> {
    const job = await this.find(orgId, id);
    if (!job) throw problems.notFound(`no job ${id} in this organization`);
    return job;
  }

  async update(orgId: number, id: number, fields: JobFields): Promise<Job> {
    await this.conflictIfNamed(orgId, fields, () =>
      this.storage.db
        .updateTable('jobs')
        .set({ name: fields.name, targets: this.storage.encodeJson(fields.targets), mode: fields.mode, updated_at: this.storage.now() })
        .where('org_id', '=', orgId)
        .where('id', '=', id)
        .execute(),
    );
    return this.get(orgId, id);
  }

  async remove(orgId: number, id: number): Promise<Job> {
    const job = await this.get(orgId, id);
    await this.storage.db.deleteFrom('jobs').where('org_id', '=', orgId).where('id', '=', id).execute();
    return job;
  }

  async countInProject(orgId: number, projectId: number): Promise<number> {
    const { n } = await this.storage.db.selectFrom('jobs').select((eb) => eb.fn.countAll<number>().as('n')).where('org_id', '=', orgId).where('project_id', '=', projectId).executeTakeFirstOrThrow();
    return Number(n);
  }

  private async conflictIfNamed<T>(orgId: number, fields: JobFields, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (err) {
      if (this.storage.isUniqueViolation(err)) throw problems.conflict(`a job named "${fields.name}" already exists in project ${fields.project_id}`);
      throw err;
    }
  }
}
