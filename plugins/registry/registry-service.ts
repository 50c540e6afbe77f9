import { HttpProblem, problems, type FieldError } from '../../kernel/plugin-api.ts';
import type { PipelineRuns } from '../pipeline/public.ts';
import { valueProblem, type Feature } from './encoding.ts';
import { PredictionThread } from './prediction-thread.ts';
import type { Model, ModelStore, ModelVersion } from './model-store.ts';
import { loadOnnx, type OnnxArtifact, type OnnxOutput } from './onnx-model.ts';
import type { Predictions, RegistryModels } from './public.ts';

/** Loaded models kept for predictions, by version id (a version never changes once trained). */
const LOADED_MAX = 32;

/** A version ready to predict: rows already checked against its features. */
interface LoadedVersion {
  features: Feature[];
  predict(rows: Record<string, unknown>[]): Promise<Omit<Predictions, 'version'>>;
}

/**
 * Models as the routes and other plugins read them: versions with their run's outcome, the active
 * version, predictions.
 */
export class RegistryService implements RegistryModels {
  /** Versions loaded or being loaded: the calls arriving while a version loads share that load. */
  private readonly loaded = new Map<number, Promise<LoadedVersion>>();
  private readonly thread = new PredictionThread();

  constructor(
    private readonly models: ModelStore,
    private readonly runs: PipelineRuns,
  ) {}

  async find(orgId: number, modelId: number) {
    const model = await this.models.get(orgId, modelId).catch(() => null);
    return model && { id: model.id, name: model.name, active_version: model.active_version };
  }

  /**
   * The model's versions, oldest first. A version still training whose run ended without it (cancelled
   * before it started, or its instance lost twice) takes its run's outcome here.
   */
  async versions(orgId: number, modelId: number): Promise<ModelVersion[]> {
    await this.models.get(orgId, modelId);
    const versions = await this.models.versions(orgId, modelId);
    for (const version of versions) {
      if (version.status !== 'training' || version.run_id === null) continue;
      const run = await this.runs.get(orgId, version.run_id);
      if (run.status !== 'failed' && run.status !== 'cancelled') continue;
      await this.models.ended(version.id, run.status, run.error?.detail ?? `its run ended ${run.status}`);
      Object.assign(version, { status: run.status, error: run.error?.detail ?? null });
    }
    return versions;
  }

  /** Makes a trained version the active one (promote or roll back); a version not trained is a 409. */
  async activate(orgId: number, modelId: number, number: number): Promise<{ model: Model; previous: number | null }> {
    const model = await this.models.get(orgId, modelId);
    const version = (await this.versions(orgId, modelId)).find((v) => v.version === number);
    if (!version) throw problems.unprocessable(`model ${modelId} has no version ${number}`, [{ path: 'body.version', message: 'no such version' }]);
    if (version.status !== 'ready') throw new HttpProblem(409, `version ${number} is ${version.status}: only a trained version can be active`, { errors: [{ path: 'body.version', message: `is ${version.status}` }] });
    await this.models.activate(orgId, modelId, number);
    return { model: await this.models.get(orgId, modelId), previous: model.active_version };
  }

  /** Deletes the model and its versions; refused (409) while a version is training: cancel its run first. */
  async remove(orgId: number, modelId: number): Promise<Model> {
    const model = await this.models.get(orgId, modelId);
    const versions = await this.versions(orgId, modelId);
    const training = versions.filter((v) => v.status === 'training');
    if (training.length) throw problems.conflict(`version ${training[0].version} of model ${model.name} is training (run ${training[0].run_id}): cancel its run first`);
    await this.models.remove(orgId, modelId);
    for (const version of versions) this.loaded.delete(version.id);
    return model;
  }

  async signature(orgId: number, modelId: number, number: number | null) {
    const { model, version } = await this.ready(orgId, modelId, number);
    return { version: version.version, task: model.task, features: version.spec.features };
  }

  async predict(orgId: number, modelId: number, number: number | null, rows: Record<string, unknown>[]): Promise<Predictions> {
    const { version } = await this.ready(orgId, modelId, number);
    const wanted = version.version;
    const loaded = await this.load(version);
    const errors: FieldError[] = [];
    rows.forEach((row, i) => {
      for (const feature of loaded.features) {
        const problem = Object.hasOwn(row, feature.name) ? valueProblem(feature, row[feature.name]) : 'missing';
        if (problem) errors.push({ path: `body.rows.${i}.${feature.name}`, message: problem });
      }
    });
    if (errors.length) throw problems.badRequest(`${errors.length} value(s) do not fit the model's features: ${errors.slice(0, 5).map((e) => `${e.path} ${e.message}`).join('; ')}`, errors.slice(0, 100));
    return { ...(await loaded.predict(rows)), version: wanted };
  }

  /** The version asked (null: the active one), ready to predict; else a 409 saying why. */
  private async ready(orgId: number, modelId: number, number: number | null): Promise<{ model: Model; version: ModelVersion }> {
    const model = await this.models.get(orgId, modelId);
    const wanted = number ?? model.active_version;
    if (wanted === null) throw problems.conflict(`model ${model.name} has no active version yet`);
    const version = await this.models.version(orgId, modelId, wanted);
    if (!version) throw problems.conflict(`model ${model.name} has no version ${wanted}`);
    if (version.status !== 'ready') throw problems.conflict(`version ${wanted} of model ${model.name} is ${version.status}`);
    return { model, version };
  }

  /**
   * Imports an ONNX model as the model's next version once it loads and fits what was declared
   * (each problem a 400 naming the field; nothing stored). Its task must be the model's.
   */
  async importVersion(orgId: number, modelId: number, file: Buffer, features: Feature[], output: OnnxOutput, userId: number | null): Promise<ModelVersion> {
    const model = await this.models.get(orgId, modelId);
    if (output.task !== model.task) throw problems.badRequest(`model ${model.name} is a ${model.task} model`, [{ path: 'body.output.task', message: `the model is a ${model.task} model` }]);
    const { model: loaded, output: read } = await loadOnnx(file, features, output);
    const version = await this.models.imported(model, { algorithm: 'onnx', task: model.task, features, output: read, onnx: file.toString('base64') }, userId);
    this.remember(version.id, Promise.resolve({ features, predict: (rows) => loaded.predict(rows) }));
    return version;
  }

  /**
   * The version ready to predict, loaded once however many calls ask for it at the same time: each
   * load of a first call used to read (and parse) the whole artifact, and a burst of first calls
   * of a large forest held up every other request for seconds. A load that fails is not kept.
   */
  private load(version: ModelVersion): Promise<LoadedVersion> {
    let loading = this.loaded.get(version.id);
    if (!loading) {
      loading = this.loadVersion(version);
      this.remember(version.id, loading);
      loading.catch(() => {
        if (this.loaded.get(version.id) === loading) this.loaded.delete(version.id);
      });
    }
    return loading;
  }

  private async loadVersion(version: ModelVersion): Promise<LoadedVersion> {
    if (version.algorithm === 'onnx') return loadStored((await this.models.artifact(version.id)) as OnnxArtifact);
    // A trained version is never read here: its features are the version's (it was trained on
    // them), and the thread is sent the artifact's text, parsed there, when it lacks the version.
    return { features: version.spec.features, predict: (rows) => this.thread.predict(version.id, rows, () => this.models.artifactText(version.id)) };
  }

  /** Stops the prediction thread (the plugin unloads). */
  dispose(): Promise<void> {
    return this.thread.dispose();
  }

  private remember(versionId: number, entry: Promise<LoadedVersion>): void {
    if (this.loaded.size >= LOADED_MAX) this.loaded.delete(this.loaded.keys().next().value!);
    this.loaded.set(versionId, entry);
  }
}

/** A stored import loaded again (it was checked when imported). */
async function loadStored(artifact: OnnxArtifact): Promise<LoadedVersion> {
  const { model } = await loadOnnx(Buffer.from(artifact.onnx, 'base64'), artifact.features, artifact.output);
  return { features: artifact.features, predict: (rows) => model.predict(rows) };
}
