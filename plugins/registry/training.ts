import { problems, WorkAborted } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog } from '../datasets/public.ts';
import type { RunKindContribution, RunKindContext } from '../pipeline/public.ts';
import { checkColumns } from './checks.ts';
import type { ModelStore } from './model-store.ts';
import { trainInThread } from './training-thread.ts';

export const TRAINING_KIND = 'training';
/** The most rows a training reads: they are held in memory twice (here, and copied into the training thread). */
export const MAX_TRAINING_ROWS = 1_000_000;

export interface TrainingPayload {
  version_id: number;
}

/**
 * The `training` kind of run: reads the version's dataset through the datasets service as the
 * user the run acts for (row policies apply; columns checked again, PII refused without
 * `datasets.pii.read`), trains in a worker thread and stores the version. A version whose training
 * fails or is cancelled ends so, with why; one handed back to another attempt stays training.
 */
export function trainingKind(models: ModelStore, catalog: DatasetCatalog): RunKindContribution<TrainingPayload> {
  return {
    kind: TRAINING_KIND,
    description: 'Trains a version of a model of the registry',
    async execute({ orgId, payload, principal, signal, log }: RunKindContext<TrainingPayload>) {
      const version = await models.versionById(orgId, payload.version_id);
      if (!version) throw problems.notFound(`the model version to train (${payload.version_id}) was deleted`);
      if (version.status !== 'training') return log('info', `version ${version.version} is already ${version.status}`);
      // Only a version trained here is ever training (an import is ready at once): this narrows its type.
      const { algorithm, dataset_id: datasetId } = version;
      if (algorithm === 'onnx' || datasetId === null) throw problems.conflict(`version ${version.version} is imported, not trained`);
      try {
        for (const capability of ['registry.write', 'datasets.read']) {
          if (!principal.capabilities.has(capability)) throw problems.forbidden(`${principal.onBehalfOf.username} may not train models any more (capability "${capability}")`);
        }
        const model = await models.get(orgId, version.model_id);
        const dataset = await catalog.get(orgId, datasetId);
        // The dataset may have changed since the request: its columns are checked again.
        checkColumns(catalog, principal, dataset, model.task, version.target, version.spec.features.map((f) => f.name));
        const wanted = [version.target, ...version.spec.features.map((f) => f.name)];
        const columns: Record<string, unknown[]> = Object.fromEntries(wanted.map((name) => [name, []]));
        let rows = 0;
        for await (const block of catalog.stream(principal, orgId, dataset.id)) {
          for (const name of wanted) columns[name].push(...block.values[block.columns.indexOf(name)]);
          rows += block.rows;
          if (signal.aborted) throw signal.reason;
          if (rows > MAX_TRAINING_ROWS) throw problems.unprocessable(`dataset ${dataset.name} has more than ${MAX_TRAINING_ROWS} rows a training may read; train on a sample of it (a sample recipe)`);
        }
        log('info', `read ${rows} rows of dataset ${dataset.name} (version ${dataset.version}) as ${principal.onBehalfOf.username}`);
        const result = await trainInThread({ algorithm, task: model.task, params: version.spec.params, features: version.spec.features, target: version.target, test_ratio: version.spec.test_ratio, seed: version.spec.seed, columns, rows }, signal);
        if (!(await models.trained(version, result, dataset.version))) throw problems.conflict(`version ${version.version} stopped training meanwhile`);
        log('info', `version ${version.version} trained on ${result.training_rows} rows, scored on ${result.test_rows}: ${JSON.stringify(result.metrics, (key, value) => (key === 'confusion_matrix' ? undefined : value))}`);
      } catch (err) {
        const aborted = signal.aborted ? (signal.reason as WorkAborted) : null;
        // Handed back (its plugin reloading, its instance stopping): the next attempt trains it.
        if (aborted && (aborted.reason === 'released' || aborted.reason === 'lost')) throw err;
        await models.ended(version.id, aborted?.reason === 'cancelled' ? 'cancelled' : 'failed', aborted ? aborted.message : ((err as Error)?.message ?? String(err)));
        throw err;
      }
    },
  };
}
