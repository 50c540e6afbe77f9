import { problems } from '../../kernel/plugin-api.ts';
import type { DataColumn, DataColumnType, Storage } from '../../storage/index.ts';
import type { Dataset, DatasetStore } from './dataset-store.ts';
import type { DatasetContracts, DriftChange, DriftStatus, SchemaContract, SchemaDrift } from './public.ts';

/**
 * Type changes a consumer of the contract can absorb: every value of the old type is a value of
 * the new one (README: "Schema contracts and drift"). Any other change of type is breaking.
 */
export const COMPATIBLE_WIDENINGS: ReadonlyArray<[DataColumnType, DataColumnType]> = [
  ['integer', 'number'],
  ['date', 'timestamp'],
];

/** The difference between a contract's columns and the live ones, each change classified. */
export function computeDrift(contract: DataColumn[] | null, live: DataColumn[]): Pick<SchemaDrift, 'status' | 'changes'> {
  if (!contract) return { status: 'no-contract', changes: [] };
  const changes: DriftChange[] = [];
  for (const expected of contract) {
    const actual = live.find((c) => c.name === expected.name);
    if (!actual) changes.push({ column: expected.name, change: 'removed', from: expected.type, severity: 'breaking' });
    else if (actual.type !== expected.type) {
      const widening = COMPATIBLE_WIDENINGS.some(([from, to]) => from === expected.type && to === actual.type);
      changes.push({ column: expected.name, change: 'type_changed', from: expected.type, to: actual.type, severity: widening ? 'additive' : 'breaking' });
    }
  }
  for (const actual of live) {
    if (!contract.some((c) => c.name === actual.name)) changes.push({ column: actual.name, change: 'added', to: actual.type, severity: 'additive' });
  }
  const status: DriftStatus = changes.some((c) => c.severity === 'breaking') ? 'breaking' : changes.length ? 'additive' : 'ok';
  return { status, changes };
}

/**
 * Schema contracts of datasets (spec §2.6): versioned baselines, exactly one current per dataset,
 * history kept. Behind both the contract routes and the `datasets.contracts` service (which the
 * pipeline's `check_schema_drift` step calls).
 */
export class ContractService {
  constructor(private readonly storage: Storage) {}

  private decode(row: Record<string, unknown>): SchemaContract {
    return { ...(row as unknown as SchemaContract), columns: this.storage.decodeJson<DataColumn[]>(row.columns), is_current: Boolean(row.is_current) };
  }

  async current(dataset: Dataset): Promise<SchemaContract | null> {
    const row = await this.storage.db.selectFrom('dataset_contracts').selectAll().where('dataset_id', '=', dataset.id).where('is_current', '=', true).executeTakeFirst();
    return row ? this.decode(row) : null;
  }

  async history(dataset: Dataset): Promise<SchemaContract[]> {
    const rows = await this.storage.db.selectFrom('dataset_contracts').selectAll().where('dataset_id', '=', dataset.id).orderBy('version', 'desc').execute();
    return rows.map((r) => this.decode(r));
  }

  /** Captures the live schema as the new current contract; the previous one stays in the history. */
  async capture(dataset: Dataset, userId: number | null): Promise<SchemaContract> {
    if (dataset.columns.length === 0) throw problems.unprocessable('the dataset has no columns yet: there is no schema to capture');
    return this.storage.transaction(async (trx) => {
      // Captures of one dataset one after the other: two at once would both take the next version.
      await this.storage.lockForTransaction(trx, `contract-capture:${dataset.id}`);
      const latest = await trx.selectFrom('dataset_contracts').select((eb) => eb.fn.max<number>('version').as('version')).where('dataset_id', '=', dataset.id).executeTakeFirst();
      await trx.updateTable('dataset_contracts').set({ is_current: false }).where('dataset_id', '=', dataset.id).where('is_current', '=', true).execute();
      const row = await trx
        .insertInto('dataset_contracts')
        .values({
          dataset_id: dataset.id,
          org_id: dataset.org_id,
          version: Number(latest?.version ?? 0) + 1,
          columns: this.storage.encodeJson(dataset.columns.map(({ name, type }) => ({ name, type }))),
          is_current: true,
          created_by: userId,
          created_at: this.storage.now(),
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return this.decode(row);
    });
  }

  async drift(dataset: Dataset): Promise<SchemaDrift> {
    const contract = await this.current(dataset);
    return { ...computeDrift(contract?.columns ?? null, dataset.columns), contract_version: contract?.version ?? null, dataset_version: dataset.version };
  }
}

/**
 * The contract operations on a dataset named by organization and id: the `datasets.contracts`
 * service, and what the contract routes call, so both answer alike.
 */
export function contractOperations(store: DatasetStore, contracts: ContractService): DatasetContracts {
  return {
    current: async (orgId, datasetId) => contracts.current(await store.get(orgId, datasetId)),
    capture: async (orgId, datasetId, userId) => contracts.capture(await store.get(orgId, datasetId), userId),
    drift: async (orgId, datasetId) => contracts.drift(await store.get(orgId, datasetId)),
  };
}
