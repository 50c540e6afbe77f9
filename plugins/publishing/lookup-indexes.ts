import { HttpProblem, type DomainEvents } from '../../kernel/plugin-api.ts';
import { DATASET_UPDATED, type DatasetCatalog, type DatasetUpdatedEvent } from '../datasets/public.ts';
import type { ServiceStore } from './service-store.ts';

/**
 * Keeps the key columns of published lookups indexed, off the call path. Publishing creates the
 * indexes; a load that replaces a dataset's table drops them with it, so each `dataset.updated`
 * (durable: delivered after commit, and later when no instance ran) creates again those of the
 * published lookups reading that dataset. A call arriving before reads without the index.
 */
export function keepLookupsIndexed(events: DomainEvents, services: ServiceStore, catalog: DatasetCatalog): void {
  events.subscribe('lookup-indexes', {
    types: [DATASET_UPDATED],
    async handle(event) {
      const orgId = event.org_id!;
      const { dataset_id: datasetId } = event.payload as DatasetUpdatedEvent;
      const keys = new Map<string, string[]>();
      for (const service of await services.list(orgId)) {
        if (service.status !== 'published') continue;
        for (const endpoint of service.endpoints) {
          if (endpoint.kind === 'lookup' && endpoint.config.dataset_id === datasetId) keys.set(JSON.stringify(endpoint.config.keys), endpoint.config.keys);
        }
      }
      for (const columns of keys.values()) {
        // A dataset deleted since, or a key column the load removed: nothing to index (the lookup's calls say why).
        await catalog.index(orgId, datasetId, columns).catch((err: unknown) => {
          if (!(err instanceof HttpProblem && err.status < 500)) throw err;
        });
      }
    },
  });
}
