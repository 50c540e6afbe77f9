import { beforeIdCursor, problems } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';

/** How long an import may hold its project before another may take it over (an instance that died mid-import). */
const STALE_AFTER_MS = 15 * 60_000;


export type ObjectKind = 'dataset' | 'recipe' | 'rule';

export interface ImportSummary {
  datasets_created: number;
  datasets_updated: number;
  recipes_created: number;
  recipes_updated: number;
  lineage_edges: number;
  rules_created: number;
  skipped: { unique_id: string; reason: string }[];
  removed: { unique_id: string; kind: ObjectKind; ref_id: number }[];
}

export interface DbtImport {
  id: number;
  project_id: number;
  schema_version: number;
  dbt_version: string | null;
  dbt_project: string | null;
  summary: ImportSummary;
  created_by: number | null;
  created_at: string;
}

export interface ImportedObject {
  unique_id: string;
  kind: ObjectKind;
  ref_id: number;
}

/** The imports of one organization at a time, and what each dbt resource of a project became. */
export class ImportStore {
  constructor(private readonly storage: Storage) {}

  /**
   * Runs `work` as the project's only import running, on every instance: another one is a 409. A
   * mark left by an instance that died mid-import is taken over after STALE_AFTER_MS.
   */
  async exclusively<T>(orgId: number, projectId: number, work: () => Promise<T>): Promise<T> {
    const { db } = this.storage;
    await db.deleteFrom('dbt_running').where('org_id', '=', orgId).where('project_id', '=', projectId).where('started_at', '<', new Date(Date.now() - STALE_AFTER_MS).toISOString()).execute();
    try {
      await db.insertInto('dbt_running').values({ org_id: orgId, project_id: projectId, started_at: this.storage.now() }).execute();
    } catch (err) {
      if (this.storage.isUniqueViolation(err)) throw problems.conflict(`another dbt import of project ${projectId} is running; try again once it ended`);
      throw err;
    }
    try {
      return await work();
    } finally {
      await db.deleteFrom('dbt_running').where('org_id', '=', orgId).where('project_id', '=', projectId).execute();
    }
  }

  /** What earlier imports of the project made: by kind, unique_id → id. */
  async objects(orgId: number, projectId: number): Promise<Record<ObjectKind, Map<string, number>>> {
    const rows = await this.storage.db.selectFrom('dbt_objects').select(['unique_id', 'kind', 'ref_id']).where('org_id', '=', orgId).where('project_id', '=', projectId).execute();
    const byKind: Record<ObjectKind, Map<string, number>> = { dataset: new Map(), recipe: new Map(), rule: new Map() };
    for (const row of rows) byKind[row.kind as ObjectKind]?.set(row.unique_id, Number(row.ref_id));
    return byKind;
  }

  /**
   * Records the import and the project's objects as they now are (replacing those recorded
   * before), in one transaction.
   */
  async save(orgId: number, fields: Omit<DbtImport, 'id' | 'created_at'>, objects: ImportedObject[]): Promise<DbtImport> {
    const { storage } = this;
    const id = await storage.transaction(async (trx) => {
      const row = await trx
        .insertInto('dbt_imports')
        .values({ org_id: orgId, project_id: fields.project_id, schema_version: fields.schema_version, dbt_version: fields.dbt_version, dbt_project: fields.dbt_project, summary: storage.encodeJson(fields.summary), created_by: fields.created_by, created_at: storage.now() })
        .returning('id')
        .executeTakeFirstOrThrow();
      const importId = Number(row.id);
      await trx.deleteFrom('dbt_objects').where('org_id', '=', orgId).where('project_id', '=', fields.project_id).execute();
      for (let i = 0; i < objects.length; i += 500) {
        await trx.insertInto('dbt_objects').values(objects.slice(i, i + 500).map((o) => ({ org_id: orgId, project_id: fields.project_id, unique_id: o.unique_id, kind: o.kind, ref_id: o.ref_id, import_id: importId }))).execute();
      }
      return importId;
    });
    return this.get(orgId, id);
  }

  async get(orgId: number, id: number): Promise<DbtImport> {
    const row = await this.storage.db.selectFrom('dbt_imports').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (!row) throw problems.notFound(`no dbt import ${id} in this organization`);
    return this.decode(row);
  }

  /** The organization's imports (of one project with `project_id`), newest first, `limit` at a time from `cursor`. */
  async list(orgId: number, filter: { project_id?: number; limit: number; cursor?: string }): Promise<{ items: DbtImport[]; next_cursor: string | null }> {
    let query = this.storage.db.selectFrom('dbt_imports').selectAll().where('org_id', '=', orgId);
    if (filter.project_id !== undefined) query = query.where('project_id', '=', filter.project_id);
    if (filter.cursor) query = query.where('id', '<', beforeIdCursor.decode(filter.cursor));
    const rows = await query.orderBy('id', 'desc').limit(filter.limit + 1).execute();
    const items = rows.slice(0, filter.limit).map((row) => this.decode(row));
    return { items, next_cursor: rows.length > filter.limit ? beforeIdCursor.encode(items[items.length - 1].id) : null };
  }

  private decode(row: Record<string, any>): DbtImport {
    return {
      id: Number(row.id),
      project_id: Number(row.project_id),
      schema_version: Number(row.schema_version),
      dbt_version: row.dbt_version,
      dbt_project: row.dbt_project,
      summary: this.storage.decodeJson<ImportSummary>(row.summary),
      created_by: row.created_by === null ? null : Number(row.created_by),
      created_at: row.created_at,
    };
  }
}
