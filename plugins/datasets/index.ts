import { actingUser, ChangeCountedCache, definePlugin, fieldErrorsOf, kernelServices, problems } from '../../kernel/plugin-api.ts';
import { projectCatalog, projectDeleteGuards } from '../projects/public.ts';
import { contractRoutes } from './contract-routes.ts';
import { policyRoutes } from './policy-routes.ts';
import { RowPolicies } from './row-policies.ts';
import { datasetCatalog, datasetContracts, DATASET_DELETED, type DatasetDeletedEvent } from './public.ts';
import { contractOperations, ContractService } from './contracts.ts';
import { DatasetStore, type Dataset, type NewDataset } from './dataset-store.ts';
import { columnLookup, compileFilter } from './filters.ts';
import { DatasetLoader, type StagedTarget } from './loader.ts';
import { indexColumns } from './lookup-index.ts';
import { DATASETS_COUNTER, datasetMigrations } from './migrations.ts';
import { datasetRoutes, parseUploadLimit } from './routes.ts';
import { rowsReader, rowsStreamer, seesPii } from './rows-query.ts';
import { parseJsonValue, parseText } from './values.ts';
import { newDatasetInput } from './schemas.ts';

/** A dataset shared by every caller of the catalog's cache: nobody changes it under the others. */
function frozen(dataset: Dataset): Dataset {
  for (const column of dataset.columns) Object.freeze(column);
  Object.freeze(dataset.columns);
  return Object.freeze(dataset);
}

/** The `datasets` router: datasets as real tables, CSV and JSON ingest, row queries, export, schema contracts. */
export default definePlugin({
  deps: { storage: kernelServices.storage, config: kernelServices.config, groups: kernelServices.groups, identity: kernelServices.identity, logger: kernelServices.logger, events: kernelServices.events },
  migrations: datasetMigrations,
  init: async ({ storage, config, groups, identity, logger, events }, ctx) => {
    const store = new DatasetStore(storage, ctx.useService(projectCatalog));
    ctx.contribute(projectDeleteGuards, async (orgId, projectId) => {
      const count = await store.countInProject(orgId, projectId);
      return count ? `it holds ${count} dataset${count === 1 ? '' : 's'}; delete or move them first` : null;
    });
    const contracts = new ContractService(storage);
    const operations = contractOperations(store, contracts);
    const loader = new DatasetLoader(storage, store, events);
    const abandoned = await loader.dropAbandoned();
    if (abandoned.length) logger.warn({ tables: abandoned }, 'dropped the staging tables of loads that were cut short');
    const policies = new RowPolicies(storage, groups, identity);
    const readRows = rowsReader(storage, store, policies, config.SQL_MAX_RESULT_BYTES);
    const removeDataset = (orgId: number, id: number) =>
      store.remove(orgId, id, (trx, doomed) => events.publish({ type: DATASET_DELETED, orgId, payload: { dataset_id: doomed.id, name: doomed.name } satisfies DatasetDeletedEvent }, trx));
    // Other plugins' reads of a dataset (a service call's, say) come from memory until the datasets table changes.
    const known = new ChangeCountedCache<string, Dataset>(storage, DATASETS_COUNTER);
    ctx.provideService(datasetCatalog, {
      get: (orgId, id) => known.get(`${orgId}:${id}`, async () => frozen(await store.get(orgId, id))),
      // The route's own body schema: a plugin creating a dataset meets the checks a client meets.
      create: async (orgId, projectId, input, principal) => {
        const parsed = newDatasetInput.safeParse({ ...input, project_id: projectId });
        if (!parsed.success) throw problems.badRequest('the dataset is not valid', fieldErrorsOf(parsed.error.issues, 'body'));
        return store.create(orgId, parsed.data as NewDataset, actingUser(principal)?.userId ?? null);
      },
      describe: async (orgId, id, docs) => {
        const described = (current: Dataset) => ({
          description: docs.description === undefined ? current.description : docs.description,
          columns: current.columns.map((c) => ({ ...c, description: docs.columns?.find((d) => d.name === c.name)?.description ?? c.description })),
        });
        const differs = (current: Dataset) => {
          const { description, columns } = described(current);
          return description !== current.description || columns.some((c, i) => c.description !== current.columns[i].description);
        };
        // Written only when something differs: a re-import of an unchanged project leaves the dataset's updated_at alone.
        const current = await store.get(orgId, id);
        if (!differs(current)) return { dataset: current, changed: false };
        return { dataset: await store.update(orgId, id, described), changed: true };
      },
      remove: async (orgId, id) => {
        await removeDataset(orgId, id);
      },
      findByNames: (orgId, names) => store.findByNames(orgId, names),
      inProject: (orgId, projectId) => store.inProject(orgId, projectId),
      load: (dataset, columns, batches, mode) => loader.load(dataset as Dataset, columns, batches, mode),
      replace: (targets, fill) => loader.replace(targets as StagedTarget[], fill),
      condition: (columns, filter, where) => {
        const column = columnLookup(columns.map((c) => ({ ...c, pii: false, description: null })));
        return compileFilter(filter, (name) => column(name, where), where);
      },
      // The catalog hands out the datasets it read itself, which carry their table name.
      table: (dataset) => storage.dataTables.ref(dataset.org_id, (dataset as Dataset).table_name),
      seesPii,
      scope: (principal, dataset) => policies.scope(principal, dataset as Dataset),
      governed: async (principal, dataset, name = dataset.name) => {
        const condition = principal ? (await policies.scope(principal, dataset as Dataset)).condition : null;
        const masks = principal !== null && !seesPii(principal);
        return {
          name,
          table: (dataset as Dataset).table_name,
          columns: dataset.columns.map((c) => ({ name: c.name, masked: c.pii && masks, type: c.type })),
          rowFilter: condition ? storage.dataTables.inline(condition, storage.db) : null,
        };
      },
      decode: (type, value) => storage.dataTables.decode(type, value),
      parseValue: parseJsonValue,
      parseText,
      rows: readRows,
      stream: rowsStreamer(storage, store, policies),
      index: async (orgId, id, columns) => indexColumns(storage, await store.get(orgId, id), columns),
    });
    ctx.provideService(datasetContracts, operations);
    return {
      routes: [
        ...datasetRoutes({ store, policies, readRows, loader, storage, removeDataset, uploadLimitBytes: parseUploadLimit(config.DATASET_UPLOAD_LIMIT), maxPageBytes: config.SQL_MAX_RESULT_BYTES, csvLimits: { field: config.CSV_MAX_FIELD_BYTES, record: config.CSV_MAX_RECORD_BYTES } }),
        ...policyRoutes({ store, policies }),
        ...contractRoutes({ store, contracts, operations }),
      ],
    };
  },
});
