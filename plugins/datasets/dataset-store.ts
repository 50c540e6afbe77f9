import { sql, type Transaction } from 'kysely';
import { problems } from '../../kernel/plugin-api.ts';
import { containsText, type DataColumn, type Storage } from '../../storage/index.ts';
import type { ProjectCatalog } from '../projects/public.ts';

export interface DatasetColumn extends DataColumn {
  pii: boolean;
  description: string | null;
}

export interface Dataset {
  id: number;
  org_id: number;
  project_id: number;
  name: string;
  description: string | null;
  columns: DatasetColumn[];
  row_count: number;
  version: number;
  table_name: string;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

/** What a new dataset is created with. */
export interface NewDataset {
  name: string;
  project_id: number;
  description?: string | null;
  columns: DatasetColumn[];
}

/** What a change of a dataset's record may set. */
export interface DatasetChanges {
  name?: string;
  description?: string | null;
  columns?: DatasetColumn[];
}

/** The dataset catalog of one organization at a time; every read and write filters by `orgId`. */
export class DatasetStore {
  constructor(
    private readonly storage: Storage,
    private readonly projects: ProjectCatalog,
  ) {}

  private decode(row: Record<string, unknown>): Dataset {
    return { ...(row as unknown as Dataset), columns: this.storage.decodeJson<DatasetColumn[]>(row.columns), row_count: Number(row.row_count) };
  }

  /** How many datasets a project holds (a project holding any cannot be deleted). */
  async countInProject(orgId: number, projectId: number): Promise<number> {
    const { n } = await this.storage.db.selectFrom('datasets').select((eb) => eb.fn.countAll<number>().as('n')).where('org_id', '=', orgId).where('project_id', '=', projectId).executeTakeFirstOrThrow();
    return Number(n);
  }

  async create(orgId: number, input: NewDataset, userId: number | null): Promise<Dataset> {
    if (!(await this.projects.exists(orgId, input.project_id))) {
      throw problems.unprocessable(`project ${input.project_id} does not exist in this organization`, [{ path: 'body.project_id', message: 'no such project' }]);
    }
    const { storage } = this;
    const now = storage.now();
    try {
      return await storage.transaction(async (trx) => {
        const row = await trx
          .insertInto('datasets')
          .values({
            org_id: orgId,
            project_id: input.project_id,
            name: input.name,
            description: input.description ?? null,
            columns: storage.encodeJson(input.columns),
            row_count: 0,
            version: 1,
            table_name: 'pending',
            created_by: userId,
            created_at: now,
            updated_at: now,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        const tableName = `ds_${row.id}`;
        await trx.updateTable('datasets').set({ table_name: tableName }).where('id', '=', row.id).execute();
        await storage.dataTables.create(trx, orgId, tableName, input.columns);
        return this.decode({ ...row, table_name: tableName });
      });
    } catch (err) {
      throw await this.nameConflict(err, orgId, input.name);
    }
  }

  /** A unique violation is a name conflict only when the name is taken: any other stays the fault it is. */
  private async nameConflict(err: unknown, orgId: number, name: string | undefined): Promise<unknown> {
    if (!this.storage.isUniqueViolation(err) || name === undefined) return err;
    const taken = await this.storage.db.selectFrom('datasets').select('id').where('org_id', '=', orgId).where('name', '=', name).executeTakeFirst();
    return taken ? problems.conflict(`a dataset named "${name}" already exists in this organization`) : err;
  }

  async list(orgId: number, page: { limit: number; offset: number; search?: string; project_id?: number }): Promise<{ items: Dataset[]; total: number }> {
    let query = this.storage.db.selectFrom('datasets').where('org_id', '=', orgId);
    if (page.project_id !== undefined) query = query.where('project_id', '=', page.project_id);
    if (page.search) query = query.where(sql<boolean>`(${containsText(sql.ref('name'), page.search)} or ${containsText(sql`coalesce(description, '')`, page.search)})`);
    const rows = await query.selectAll().orderBy('id').limit(page.limit).offset(page.offset).execute();
    const { total } = await query.select((eb) => eb.fn.countAll<number>().as('total')).executeTakeFirstOrThrow();
    return { items: rows.map((r) => this.decode(r)), total: Number(total) };
  }

  async inProject(orgId: number, projectId: number): Promise<Dataset[]> {
    const rows = await this.storage.db.selectFrom('datasets').selectAll().where('org_id', '=', orgId).where('project_id', '=', projectId).orderBy('id').execute();
    return rows.map((r) => this.decode(r));
  }

  async findByNames(orgId: number, names: string[]): Promise<Dataset[]> {
    if (names.length === 0) return [];
    const lower = names.map((n) => n.toLowerCase());
    const rows = await this.storage.db.selectFrom('datasets').selectAll().where('org_id', '=', orgId).where(sql<string>`lower(name)`, 'in', lower).execute();
    return rows.map((r) => this.decode(r));
  }

  /** The dataset, if it belongs to the organization; another organization's is "not found". */
  async get(orgId: number, id: number): Promise<Dataset> {
    const row = await this.storage.db.selectFrom('datasets').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (!row) throw problems.notFound(`no dataset ${id} in this organization`);
    return this.decode(row);
  }

  /**
   * Changes a dataset's name, description or columns as `change` decides from the dataset as it is.
   * The columns are written only if nobody changed them since they were read (else `change` runs
   * again on the newer ones): a PATCH of a description never undoes a PII flag set meanwhile, nor
   * does a check made on columns that are no longer there let a change through.
   */
  async update(orgId: number, id: number, change: (current: Dataset) => DatasetChanges | Promise<DatasetChanges>): Promise<Dataset> {
    for (;;) {
      const row = await this.storage.db.selectFrom('datasets').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
      if (!row) throw problems.notFound(`no dataset ${id} in this organization`);
      const { columns, ...fields } = await change(this.decode(row));
      let written;
      try {
        written = await this.storage.db
          .updateTable('datasets')
          .set({ ...fields, ...(columns ? { columns: this.storage.encodeJson(columns) } : {}), updated_at: this.storage.now() })
          .where('org_id', '=', orgId)
          .where('id', '=', id)
          // The stored value, written as a value of the column's type (JSON text, compared as JSON on Postgres).
          .where('columns', '=', this.storage.encodeJson(this.storage.decodeJson(row.columns)))
          .executeTakeFirst();
      } catch (err) {
        throw await this.nameConflict(err, orgId, fields.name);
      }
      if (Number(written.numUpdatedRows) === 1) return this.get(orgId, id);
    }
  }

  /** Deletes the dataset and its table; `alsoInTransaction` runs in the same transaction (the event that reports it). */
  async remove(orgId: number, id: number, alsoInTransaction: (trx: Transaction<any>, dataset: Dataset) => Promise<unknown>): Promise<Dataset> {
    const dataset = await this.get(orgId, id);
    await this.storage.transaction(async (trx) => {
      await trx.deleteFrom('datasets').where('org_id', '=', orgId).where('id', '=', id).execute();
      await this.storage.dataTables.drop(trx, orgId, dataset.table_name);
      await alsoInTransaction(trx, dataset);
    });
    return dataset;
  }
}
