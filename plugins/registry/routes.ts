import { defineRoute, identitySchemas as s, problems, reply, z, type Principal } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog } from '../datasets/public.ts';
import type { PipelineRuns } from '../pipeline/public.ts';
import type { ProjectCatalog } from '../projects/public.ts';
import { ALGORITHMS, ONLY_TASK, PARAMS_SCHEMAS, TASKS } from './algorithms.ts';
import { checkTraining } from './checks.ts';
import { IMPORT_FORM, readImportForm } from './import-request.ts';
import type { Model, ModelStore, ModelVersion } from './model-store.ts';
import type { RegistryService } from './registry-service.ts';
import { importedModelInput, modelSchema, predictAnswer, predictInput, trainAnswer, trainInput, versionSchema } from './schemas.ts';
import { TRAINING_KIND } from './training.ts';

export interface RegistryRouteDeps {
  models: ModelStore;
  service: RegistryService;
  runs: PipelineRuns;
  catalog: DatasetCatalog;
  projects: ProjectCatalog;
  /** REGISTRY_ONNX_LIMIT, as written and in bytes. */
  onnxLimit: { text: string; bytes: number };
}

const base = { security: 'bearer', orgScoped: true } as const;
const idParams = s.idParam('id');

const publicModel = ({ org_id: _org, created_by: _by, ...model }: Model) => model;
const publicVersion = ({ id: _id, model_id: _model, spec, ...version }: ModelVersion) => ({ ...version, features: spec.features, params: spec.params, test_ratio: spec.test_ratio, seed: spec.seed });
const userOf = (principal: Principal) => ('userId' in principal ? principal.userId : null);

export function registryRoutes({ models, service, runs, catalog, projects, onnxLimit }: RegistryRouteDeps) {
  return [
    defineRoute({
      ...base,
      method: 'post',
      path: '/models',
      summary: 'Train a model',
      description:
        'Trains a new version of the project\u2019s model of that name (created with its first version) as a run of kind `training` (GET /api/pipeline/runs?kind=training: logged, cancellable). The dataset is read with the caller\u2019s rights: row policies apply, and PII columns need `datasets.pii.read`. Rows are split by `seed`; string and boolean features are one-hot encoded (an unseen category is all zeros), a missing number takes the training mean. The first trained version becomes the active one.',
      capability: 'registry.write',
      request: { body: trainInput },
      responses: {
        202: { description: 'Training queued', schema: trainAnswer },
        403: { description: 'A PII column without datasets.pii.read (named)' },
        409: { description: 'The model of that name is of another task' },
        422: { description: 'A project or dataset that does not exist here' },
      },
      handler: async ({ body, orgId, principal, audit }) => {
        const { features } = await checkTraining(catalog, projects, principal, orgId, body);
        const { model, version } = await models.addVersion(
          orgId,
          { project_id: body.project_id, name: body.name, task: body.task, algorithm: body.algorithm, dataset_id: body.dataset_id, target: body.target, spec: { features, params: body.params, test_ratio: body.test_ratio, seed: body.seed } },
          userOf(principal),
        );
        let run;
        try {
          run = await runs.start(orgId, { kind: TRAINING_KIND, project_id: body.project_id, trigger: principal.kind === 'user' ? 'manual' : 'api', payload: { version_id: version.id } }, principal);
        } catch (err) {
          await models.ended(version.id, 'failed', `its run could not start: ${(err as Error).message}`);
          throw err;
        }
        await models.setRun(version.id, run.id);
        await audit.record({ action: 'registry.model.train', targetType: 'model', targetId: model.id, details: { name: model.name, version: version.version, run_id: run.id, algorithm: body.algorithm, dataset_id: body.dataset_id } });
        return reply(202, { model: publicModel(model), version: publicVersion({ ...version, run_id: run.id }), run: await runs.get(orgId, run.id) });
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/imported-models',
      summary: 'Create a model to import into',
      description: 'A model with no version yet, for models trained elsewhere: import its versions with POST /api/registry/models/{id}/versions.',
      capability: 'registry.write',
      request: { body: importedModelInput },
      responses: { 201: { description: 'Created', schema: modelSchema }, 409: { description: 'The project has a model of that name' }, 422: { description: 'A project that does not exist here' } },
      handler: async ({ body, orgId, principal, audit }) => {
        if (!(await projects.exists(orgId, body.project_id))) throw problems.unprocessable(`project ${body.project_id} does not exist in this organization`, [{ path: 'body.project_id', message: 'no such project' }]);
        const model = await models.createModel(orgId, body, userOf(principal));
        await audit.record({ action: 'registry.model.create', targetType: 'model', targetId: model.id, details: { name: model.name, task: model.task } });
        return reply(201, publicModel(model));
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/models/{id}/versions',
      summary: 'Import an ONNX model',
      description:
        'Adds a version from an ONNX model trained elsewhere (a multipart form: `file`, and `features` and `output` as JSON). It is loaded with onnxruntime and checked against what is declared before it is accepted: one input per feature (named as it, shape [n] or [n, 1]) or all features packed into a single [n, k] input, element types fitting the features\u2019 types, the output present, a tensor, fitting the task; a row of neutral values must run through it. Any problem is a 400 naming the field; nothing is stored. The version is ready at once (active when the model has none) and immutable.',
      capability: 'registry.write',
      request: { params: idParams, stream: { contentTypes: ['multipart/form-data'], description: 'The model and its declarations', schemas: IMPORT_FORM } },
      responses: {
        201: { description: 'Imported', schema: versionSchema },
        400: { description: 'Not an ONNX model, or one that does not fit the declared features or output (the field is named)' },
        413: { description: 'The file is larger than REGISTRY_ONNX_LIMIT' },
      },
      handler: async ({ params, orgId, principal, audit, koa }) => {
        await models.get(orgId, params.id);
        const form = await readImportForm(koa, onnxLimit.bytes, onnxLimit.text);
        const version = await service.importVersion(orgId, params.id, form.file, form.features, form.output, userOf(principal));
        await audit.record({ action: 'registry.model.import', targetType: 'model', targetId: params.id, details: { version: version.version, bytes: form.file.length } });
        return reply(201, publicVersion(version));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/algorithms',
      summary: 'List algorithms',
      description: 'The algorithms a model trains with, the tasks each does and the JSON Schema of its `params`.',
      capability: 'registry.read',
      responses: { 200: { description: 'Algorithms', schema: z.object({ items: z.array(z.object({ id: z.enum(ALGORITHMS), tasks: z.array(z.enum(TASKS)), params: z.record(z.string(), z.unknown()) })) }) } },
      handler: async () => ({ items: ALGORITHMS.map((id) => ({ id, tasks: ONLY_TASK[id] ? [ONLY_TASK[id]!] : [...TASKS], params: PARAMS_SCHEMAS[id] })) }),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/models',
      summary: 'List models',
      description: 'The models of this organization, of one project with `project_id`.',
      capability: 'registry.read',
      request: { query: z.object({ project_id: s.pathId.optional() }) },
      responses: { 200: { description: 'Models', schema: z.object({ items: z.array(modelSchema) }) } },
      handler: async ({ query, orgId }) => ({ items: (await models.list(orgId, query.project_id)).map(publicModel) }),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/models/{id}',
      summary: 'Get a model',
      description: 'One model: its task and active version.',
      capability: 'registry.read',
      request: { params: idParams },
      responses: { 200: { description: 'The model', schema: modelSchema } },
      handler: async ({ params, orgId }) => publicModel(await models.get(orgId, params.id)),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/models/{id}/versions',
      summary: 'List versions of a model',
      description: 'Every version, oldest first: its status, algorithm, features, metrics on the test split, feature importance, rows and the dataset version it was trained on. Versions never change once trained.',
      capability: 'registry.read',
      request: { params: idParams },
      responses: { 200: { description: 'Versions', schema: z.object({ items: z.array(versionSchema) }) } },
      handler: async ({ params, orgId }) => ({ items: (await service.versions(orgId, params.id)).map(publicVersion) }),
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/models/{id}/active',
      summary: 'Set the active version',
      description: 'Promotes a trained version, or rolls back to an earlier one: predictions come from it from then on.',
      capability: 'registry.write',
      request: { params: idParams, body: z.object({ version: z.number().int().positive().max(Number.MAX_SAFE_INTEGER) }) },
      responses: { 200: { description: 'The model', schema: modelSchema }, 409: { description: 'The version is not trained' }, 422: { description: 'No such version' } },
      handler: async ({ params, body, orgId, audit }) => {
        const { model, previous } = await service.activate(orgId, params.id, body.version);
        await audit.record({ action: 'registry.model.activate', targetType: 'model', targetId: model.id, details: { from: previous, to: body.version } });
        return publicModel(model);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/models/{id}/predict',
      summary: 'Predict',
      description: 'Predictions of the active version for `rows`, each an object of its features (null: a missing value, handled as at training). A row missing a feature or with a value of the wrong type is a 400 naming `body.rows.<i>.<feature>`.',
      capability: 'registry.read',
      request: { params: idParams, body: predictInput },
      responses: { 200: { description: 'Predictions', schema: predictAnswer }, 409: { description: 'The model has no active version' } },
      handler: async ({ params, body, orgId }) => service.predict(orgId, params.id, null, body.rows),
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/models/{id}',
      summary: 'Delete a model',
      description: 'Deletes the model and every version; refused (409) while a version is training: cancel its run first. Its training runs stay.',
      capability: 'registry.write',
      request: { params: idParams },
      responses: { 204: { description: 'Deleted' }, 409: { description: 'A version is training' } },
      handler: async ({ params, orgId, audit }) => {
        const model = await service.remove(orgId, params.id);
        await audit.record({ action: 'registry.model.delete', targetType: 'model', targetId: model.id, details: { name: model.name } });
        return reply(204);
      },
    }),
  ];
}
