import type { Kysely, Transaction } from 'kysely';
import { problems } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';

export interface Recipe {
  id: number;
  org_id: number;
  project_id: number;
  name: string;
  type: string;
  inputs: number[];
  outputs: number[];
  params: unknown;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

/** What a recipe is saved with. */
export interface RecipeFields {
  project_id: number;
  name: string;
  type: string;
  inputs: number[];
  outputs: number[];
  params: unknown;
}

/**
 * Recipes of one organization at a time, with the datasets each reads (inputs, in order) and
 * writes (outputs). Every read and write filters by `orgId`.
 */
export class RecipeStore {
  constructor(private readonly storage: Storage) {}

  async list(orgId: number, filter: { project_id?: number } = {}): Promise<Recipe[]> {
    let query = this.storage.db.selectFrom('pipeline_recipes').selectAll().where('org_id', '=', orgId);
    if (filter.project_id !== undefined) query = query.where('project_id', '=', filter.project_id);
    return this.withDatasets(orgId, await query.orderBy('id').execute());
  }

  async get(orgId: number, id: number): Promise<Recipe> {
    const row = await this.storage.db.selectFrom('pipeline_recipes').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (!row) throw problems.notFound(`no recipe ${id} in this organization`);
    return (await this.withDatasets(orgId, [row]))[0];
  }

  /** The recipe writing the dataset, if one does. */
  async producerOf(orgId: number, datasetId: number, db: Kysely<any> = this.storage.db): Promise<number | null> {
    const row = await db.selectFrom('pipeline_recipe_datasets').select('recipe_id').where('org_id', '=', orgId).where('dataset_id', '=', datasetId).where('role', '=', 'output').executeTakeFirst();
    return row ? Number(row.recipe_id) : null;
  }

  /** Saves a new recipe; `check` runs in the transaction, after the graph lock is taken (the cycle check sees every committed recipe). */
  async create(orgId: number, fields: RecipeFields, userId: number | null, check: (trx: Transaction<any>) => Promise<void>): Promise<Recipe> {
    const now = this.storage.now();
    const id = await this.inGraphTransaction(orgId, async (trx) => {
      await check(trx);
      const row = await trx
        .insertInto('pipeline_recipes')
        .values({ org_id: orgId, project_id: fields.project_id, name: fields.name, type: fields.type, params: this.storage.encodeJson(fields.params), created_by: userId, created_at: now, updated_at: now })
        .returning('id')
        .executeTakeFirstOrThrow();
      await this.link(trx, orgId, Number(row.id), fields);
      return Number(row.id);
    }, fields);
    return this.get(orgId, id);
  }

  async update(orgId: number, id: number, fields: RecipeFields, check: (trx: Transaction<any>) => Promise<void>): Promise<Recipe> {
    await this.inGraphTransaction(orgId, async (trx) => {
      await check(trx);
      await trx
        .updateTable('pipeline_recipes')
        .set({ name: fields.name, type: fields.type, params: this.storage.encodeJson(fields.params), updated_at: this.storage.now() })
        .where('org_id', '=', orgId)
        .where('id', '=', id)
        .execute();
      await trx.deleteFrom('pipeline_recipe_datasets').where('recipe_id', '=', id).execute();
      await this.link(trx, orgId, id, fields);
    }, fields);
    return this.get(orgId, id);
  }

  async remove(orgId: number, id: number): Promise<Recipe> {
    const recipe = await this.get(orgId, id);
    await this.storage.db.deleteFrom('pipeline_recipes').where('org_id', '=', orgId).where('id', '=', id).execute();
    return recipe;
  }

  /** Forgets a deleted dataset wherever a recipe read or wrote it. */
  async unlinkDataset(orgId: number, datasetId: number): Promise<void> {
    await this.storage.db.deleteFrom('pipeline_recipe_datasets').where('org_id', '=', orgId).where('dataset_id', '=', datasetId).execute();
  }

  async countInProject(orgId: number, projectId: number): Promise<number> {
    const { n } = await this.storage.db.selectFrom('pipeline_recipes').select((eb) => eb.fn.countAll<number>().as('n')).where('org_id', '=', orgId).where('project_id', '=', projectId).executeTakeFirstOrThrow();
    return Number(n);
  }

  /**
   * One organization's recipe graph changes one at a time (a lock per organization): two recipes
   * saved at once can never close a cycle that neither check saw. A name taken, or an output
   * another recipe already writes, is a 409.
   */
  private async inGraphTransaction<T>(orgId: number, work: (trx: Transaction<any>) => Promise<T>, fields: RecipeFields): Promise<T> {
    try {
      return await this.storage.transaction(async (trx) => {
        await this.storage.lockForTransaction(trx, `pipeline-graph:${orgId}`);
        return work(trx);
      });
    } catch (err) {
      if (!this.storage.isUniqueViolation(err)) throw err;
      const named = await this.storage.db.selectFrom('pipeline_recipes').select('id').where('org_id', '=', orgId).where('project_id', '=', fields.project_id).where('name', '=', fields.name).executeTakeFirst();
      if (named) throw problems.conflict(`a recipe named "${fields.name}" already exists in project ${fields.project_id}`);
      throw problems.conflict('one of the outputs is already the output of another recipe (body.outputs)');
    }
  }

  private async link(trx: Transaction<any>, orgId: number, recipeId: number, fields: RecipeFields): Promise<void> {
    const rows = [
      ...fields.inputs.map((dataset_id, position) => ({ recipe_id: recipeId, org_id: orgId, dataset_id, role: 'input', position })),
      ...fields.outputs.map((dataset_id, position) => ({ recipe_id: recipeId, org_id: orgId, dataset_id, role: 'output', position })),
    ];
    if (rows.length) await trx.insertInto('pipeline_recipe_datasets').values(rows).execute();
  }

  private async withDatasets(orgId: number, rows: Record<string, any>[]): Promise<Recipe[]> {
    if (rows.length === 0) return [];
    const links = await this.storage.db
      .selectFrom('pipeline_recipe_datasets')
      .select(['recipe_id', 'dataset_id', 'role'])
      .where('org_id', '=', orgId)
      .where(
        'recipe_id',
        'in',
        rows.map((r) => r.id),
      )
      .orderBy('recipe_id')
      .orderBy('role')
      .orderBy('position')
      .execute();
    return rows.map((row) => {
      const own = links.filter((l) => Number(l.recipe_id) === Number(row.id));
      return {
        id: Number(row.id),
        org_id: Number(row.org_id),
        project_id: Number(row.project_id),
        name: row.name,
        type: row.type,
        inputs: own.filter((l) => l.role === 'input').map((l) => Number(l.dataset_id)),
        outputs: own.filter((l) => l.role === 'output').map((l) => Number(l.dataset_id)),
        params: this.storage.decodeJson(row.params),
        created_by: row.created_by === null ? null : Number(row.created_by),
        created_at: row.created_at,
        updated_at: row.updated_at,
      };
    });
  }
}
