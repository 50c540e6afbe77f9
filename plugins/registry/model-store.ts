import type { Kysely } from 'kysely';
import { HttpProblem, problems } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { Algorithm, Task } from './algorithms.ts';
import type { Feature } from './encoding.ts';
import type { ModelArtifact, TrainingResult } from './learn.ts';
import type { OnnxArtifact } from './onnx-model.ts';

export interface Model {
  id: number;
  org_id: number;
  project_id: number;
  name: string;
  task: Task;
  active_version: number | null;
  created_by: number | null;
  created_at: string;
  updated_at: string;
}

/** training: its run has not ended; ready: trained, may be promoted; failed or cancelled: its run's outcome. */
export type VersionStatus = 'training' | 'ready' | 'failed' | 'cancelled';

export interface VersionSpec {
  features: Feature[];
  params: Record<string, unknown>;
  test_ratio: number;
  seed: number;
}

/** How a version came to be: trained here (an algorithm), or imported (`onnx`). */
export type VersionAlgorithm = Algorithm | 'onnx';

export interface ModelVersion {
  id: number;
  model_id: number;
  version: number;
  status: VersionStatus;
  algorithm: VersionAlgorithm;
  /** The dataset trained on; null for an imported version. */
  dataset_id: number | null;
  target: string;
  spec: VersionSpec;
  run_id: number | null;
  metrics: Record<string, unknown> | null;
  feature_importance: Record<string, number> | null;
  training_rows: number | null;
  test_rows: number | null;
  dataset_version: number | null;
  trained_at: string | null;
  error: string | null;
  created_at: string;
}

export interface NewVersion {
  project_id: number;
  name: string;
  task: Task;
  algorithm: Algorithm;
  dataset_id: number;
  target: string;
  spec: VersionSpec;
}

const VERSION_COLUMNS = ['id', 'model_id', 'version', 'status', 'algorithm', 'dataset_id', 'target', 'spec', 'run_id', 'metrics', 'feature_importance', 'training_rows', 'test_rows', 'dataset_version', 'trained_at', 'error', 'created_at'] as const;

/** Models and their versions, one organization at a time. A version's training outcome is written once. */
export class ModelStore {
  constructor(private readonly storage: Storage) {}

  private decodeModel(row: Record<string, any>): Model {
    return { ...(row as Model), id: Number(row.id), org_id: Number(row.org_id), project_id: Number(row.project_id), active_version: row.active_version === null ? null : Number(row.active_version), created_by: row.created_by === null ? null : Number(row.created_by) };
  }

  private decodeVersion(row: Record<string, any>): ModelVersion {
    const json = <T>(value: unknown) => (value === null ? null : this.storage.decodeJson<T>(value));
    const int = (value: unknown) => (value === null ? null : Number(value));
    return {
      id: Number(row.id),
      model_id: Number(row.model_id),
      version: Number(row.version),
      status: row.status,
      algorithm: row.algorithm,
      dataset_id: int(row.dataset_id),
      target: row.target,
      spec: this.storage.decodeJson<VersionSpec>(row.spec),
      run_id: int(row.run_id),
      metrics: json(row.metrics),
      feature_importance: json(row.feature_importance),
      training_rows: int(row.training_rows),
      test_rows: int(row.test_rows),
      dataset_version: int(row.dataset_version),
      trained_at: row.trained_at ?? null,
      error: row.error ?? null,
      created_at: row.created_at,
    };
  }

  /**
   * A new version of the project's model of that name (the model created with it when there is
   * none), numbered after the model's last; a model of another task is a 409 naming `body.task`.
   */
  async addVersion(orgId: number, input: NewVersion, userId: number | null): Promise<{ model: Model; version: ModelVersion }> {
    return this.storage.transaction(async (trx) => {
      await this.storage.lockForTransaction(trx, `registry-model:${orgId}:${input.project_id}:${input.name}`);
      const now = this.storage.now();
      let row = await trx.selectFrom('registry_models').selectAll().where('org_id', '=', orgId).where('project_id', '=', input.project_id).where('name', '=', input.name).executeTakeFirst();
      if (row && row.task !== input.task) throw new HttpProblem(409, `model ${input.name} is a ${row.task} model`, { errors: [{ path: 'body.task', message: `the model is a ${row.task} model` }] });
      row ??= await trx
        .insertInto('registry_models')
        .values({ org_id: orgId, project_id: input.project_id, name: input.name, task: input.task, active_version: null, created_by: userId, created_at: now, updated_at: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      const model = this.decodeModel(row);
      const last = await trx.selectFrom('registry_model_versions').select((eb) => eb.fn.max('version').as('v')).where('model_id', '=', model.id).executeTakeFirst();
      const version = await trx
        .insertInto('registry_model_versions')
        .values({
          org_id: orgId,
          model_id: model.id,
          version: Number(last?.v ?? 0) + 1,
          status: 'training',
          algorithm: input.algorithm,
          dataset_id: input.dataset_id,
          target: input.target,
          spec: this.storage.encodeJson(input.spec),
          created_by: userId,
          created_at: now,
        })
        .returning(VERSION_COLUMNS)
        .executeTakeFirstOrThrow();
      return { model, version: this.decodeVersion(version) };
    });
  }

  /** A model without versions, to import into; a model of that name in the project is a 409 naming `body.name`. */
  async createModel(orgId: number, input: { project_id: number; name: string; task: Task }, userId: number | null): Promise<Model> {
    return this.storage.transaction(async (trx) => {
      await this.storage.lockForTransaction(trx, `registry-model:${orgId}:${input.project_id}:${input.name}`);
      const taken = await trx.selectFrom('registry_models').select('id').where('org_id', '=', orgId).where('project_id', '=', input.project_id).where('name', '=', input.name).executeTakeFirst();
      if (taken) throw new HttpProblem(409, `project ${input.project_id} already has a model ${input.name} (${taken.id})`, { errors: [{ path: 'body.name', message: 'taken in the project' }] });
      const now = this.storage.now();
      const row = await trx
        .insertInto('registry_models')
        .values({ org_id: orgId, project_id: input.project_id, name: input.name, task: input.task, active_version: null, created_by: userId, created_at: now, updated_at: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      return this.decodeModel(row);
    });
  }

  /**
   * Stores an imported model as the model's next version, ready at once (it becomes the active one
   * when the model has none).
   */
  async imported(model: Model, artifact: OnnxArtifact, userId: number | null): Promise<ModelVersion> {
    return this.storage.transaction(async (trx) => {
      await this.storage.lockForTransaction(trx, `registry-model:${model.org_id}:${model.project_id}:${model.name}`);
      const now = this.storage.now();
      const last = await trx.selectFrom('registry_model_versions').select((eb) => eb.fn.max('version').as('v')).where('model_id', '=', model.id).executeTakeFirst();
      const row = await trx
        .insertInto('registry_model_versions')
        .values({
          org_id: model.org_id,
          model_id: model.id,
          version: Number(last?.v ?? 0) + 1,
          status: 'ready',
          algorithm: 'onnx',
          dataset_id: null,
          target: artifact.output.name,
          spec: this.storage.encodeJson({ features: artifact.features, params: { output: artifact.output }, test_ratio: 0, seed: 0 }),
          trained_at: now,
          created_by: userId,
          created_at: now,
        })
        .returning(VERSION_COLUMNS)
        .executeTakeFirstOrThrow();
      await trx.insertInto('registry_model_artifacts').values({ version_id: row.id, artifact: JSON.stringify(artifact) }).execute();
      await trx.updateTable('registry_models').set({ active_version: Number(row.version), updated_at: now }).where('id', '=', model.id).where('active_version', 'is', null).execute();
      return this.decodeVersion(row);
    });
  }

  async setRun(versionId: number, runId: number): Promise<void> {
    await this.storage.db.updateTable('registry_model_versions').set({ run_id: runId }).where('id', '=', versionId).execute();
  }

  async list(orgId: number, projectId?: number): Promise<Model[]> {
    let query = this.storage.db.selectFrom('registry_models').selectAll().where('org_id', '=', orgId);
    if (projectId !== undefined) query = query.where('project_id', '=', projectId);
    return (await query.orderBy('id').execute()).map((r) => this.decodeModel(r));
  }

  async get(orgId: number, id: number, db: Kysely<any> = this.storage.db): Promise<Model> {
    const row = await db.selectFrom('registry_models').selectAll().where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    if (!row) throw problems.notFound(`no model ${id} in this organization`);
    return this.decodeModel(row);
  }

  async countInProject(orgId: number, projectId: number): Promise<number> {
    const row = await this.storage.db.selectFrom('registry_models').select((eb) => eb.fn.countAll().as('n')).where('org_id', '=', orgId).where('project_id', '=', projectId).executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async versions(orgId: number, modelId: number): Promise<ModelVersion[]> {
    const rows = await this.storage.db.selectFrom('registry_model_versions').select(VERSION_COLUMNS).where('org_id', '=', orgId).where('model_id', '=', modelId).orderBy('version').execute();
    return rows.map((r) => this.decodeVersion(r));
  }

  async version(orgId: number, modelId: number, version: number): Promise<ModelVersion | undefined> {
    const row = await this.storage.db.selectFrom('registry_model_versions').select(VERSION_COLUMNS).where('org_id', '=', orgId).where('model_id', '=', modelId).where('version', '=', version).executeTakeFirst();
    return row && this.decodeVersion(row);
  }

  async versionById(orgId: number, id: number): Promise<ModelVersion | undefined> {
    const row = await this.storage.db.selectFrom('registry_model_versions').select(VERSION_COLUMNS).where('org_id', '=', orgId).where('id', '=', id).executeTakeFirst();
    return row && this.decodeVersion(row);
  }

  async artifact(versionId: number): Promise<ModelArtifact | OnnxArtifact> {
    return JSON.parse(await this.artifactText(versionId)) as ModelArtifact | OnnxArtifact;
  }

  /** A version's artifact as its stored JSON text (a forest of many trees is megabytes of it). */
  async artifactText(versionId: number): Promise<string> {
    const row = await this.storage.db.selectFrom('registry_model_artifacts').select('artifact').where('version_id', '=', versionId).executeTakeFirstOrThrow();
    return row.artifact;
  }

  /**
   * Stores a trained version (once: a version no longer training is left as it is) and makes it the
   * model's active one when the model has none. Answers whether it stored it.
   */
  async trained(version: ModelVersion, result: TrainingResult, datasetVersion: number): Promise<boolean> {
    return this.storage.transaction(async (trx) => {
      const changed = await trx
        .updateTable('registry_model_versions')
        .set({
          status: 'ready',
          metrics: this.storage.encodeJson(result.metrics),
          feature_importance: result.feature_importance ? this.storage.encodeJson(result.feature_importance) : null,
          training_rows: result.training_rows,
          test_rows: result.test_rows,
          dataset_version: datasetVersion,
          trained_at: this.storage.now(),
        })
        .where('id', '=', version.id)
        .where('status', '=', 'training')
        .executeTakeFirst();
      if (!Number(changed.numUpdatedRows)) return false;
      await trx.insertInto('registry_model_artifacts').values({ version_id: version.id, artifact: JSON.stringify(result.artifact) }).execute();
      await trx.updateTable('registry_models').set({ active_version: version.version, updated_at: this.storage.now() }).where('id', '=', version.model_id).where('active_version', 'is', null).execute();
      return true;
    });
  }

  /** Ends a version still training as its run ended (failed or cancelled), with why. */
  async ended(versionId: number, status: 'failed' | 'cancelled', error: string): Promise<void> {
    await this.storage.db.updateTable('registry_model_versions').set({ status, error: error.slice(0, 10_000) }).where('id', '=', versionId).where('status', '=', 'training').execute();
  }

  async activate(orgId: number, modelId: number, version: number): Promise<void> {
    await this.storage.db.updateTable('registry_models').set({ active_version: version, updated_at: this.storage.now() }).where('org_id', '=', orgId).where('id', '=', modelId).execute();
  }

  async remove(orgId: number, id: number): Promise<void> {
    await this.storage.transaction(async (trx) => {
      await trx.deleteFrom('registry_model_versions').where('org_id', '=', orgId).where('model_id', '=', id).execute();
      await trx.deleteFrom('registry_models').where('org_id', '=', orgId).where('id', '=', id).execute();
    });
  }
}
