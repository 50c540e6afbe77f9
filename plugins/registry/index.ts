import bytes from 'bytes';
import { definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { datasetCatalog } from '../datasets/public.ts';
import { pipelineRuns, runKinds } from '../pipeline/public.ts';
import { projectCatalog, projectDeleteGuards } from '../projects/public.ts';
import { registryMigrations } from './migrations.ts';
import { ModelStore } from './model-store.ts';
import { registryModels } from './public.ts';
import { RegistryService } from './registry-service.ts';
import { registryRoutes } from './routes.ts';
import { trainingKind } from './training.ts';

/**
 * The `registry` router: models trained in the platform (the pipeline's runs of kind `training`,
 * contributed to `pipeline.run-kinds`) or imported as ONNX, their immutable versions, the active one, predictions; and
 * `registry.models` for the plugins serving them.
 */
export default definePlugin({
  deps: { storage: kernelServices.storage, config: kernelServices.config },
  migrations: registryMigrations,
  init: ({ storage, config }, ctx) => {
    const models = new ModelStore(storage);
    const catalog = ctx.useService(datasetCatalog);
    const projects = ctx.useService(projectCatalog);
    const runs = ctx.useService(pipelineRuns);
    ctx.contribute(runKinds, trainingKind(models, catalog));
    const service = new RegistryService(models, runs);
    ctx.onDispose(() => service.dispose());
    ctx.provideService(registryModels, service);
    ctx.contribute(projectDeleteGuards, async (orgId, projectId) => {
      const count = await models.countInProject(orgId, projectId);
      return count ? `it holds ${count} model${count === 1 ? '' : 's'}; delete them first` : null;
    });
    const onnxLimit = { text: config.REGISTRY_ONNX_LIMIT, bytes: bytes.parse(config.REGISTRY_ONNX_LIMIT) ?? 100 * 1024 ** 2 };
    return { routes: registryRoutes({ models, service, runs, catalog, projects, onnxLimit }) };
  },
});
