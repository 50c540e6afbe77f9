import type { DataColumn, DataColumnType, Storage } from '../../storage/index.ts';
import type { Dataset } from './dataset-store.ts';

export interface Contract {
  id: number;
  dataset_id: number;
  version: number;
  columns: DataColumn[];
  is_current: boolean;
  created_by: number | null;
  created_at: string;
}

export type DriftStatus = 'ok' | 'additive' | 'breaking' | 'no-contract';

export interface DriftChange {
  column: string;
  change: 'added' | 'removed' | 'type_changed';
  from?: DataColumnType;
  to?: DataColumnType;
  severity: 'additive' | 'breaking';
}

export interface Drift {
  status: DriftStatus;
  contract_version: number | null;
  dataset_version: number;
  changes: DriftChange[];
}

/**
 * Type changes a consumer of the contract can absorb: every value of the old type is a value of
 * the new one (README: "Schema contracts and drift"). Any other change of type is breaking.
 */
export const COMPATIBLE_WIDENINGS: ReadonlyArray<[DataColumnType, DataColumnType]> = [
  ['integer', 'number'],
  ['date', 'timestamp'],
];

/** The difference between a contract's columns and the live ones, each change classified. */
export function computeDrift(contract: DataColumn[] | null, live: DataColumn[]): Pick<Drift, 'status' | 'changes'> {
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
 * history kept. The pipeline's `check_schema_drift` step calls `drift` through this service.
 */
export class ContractService {
  constructor(private readonly storage: Storage) {}

  private decode(row: Record<string, unknown>): Contract {
    return { ...(row as unknown as Contract), columns: this.storage.decodeJson<DataColumn[]>(row.columns), is_current: Boolean(row.is_current) };
  }

  async current(dataset: Dataset): Promise<Contract | null> {
    const row = await this.storage.db.selectFrom('dataset_contracts').selectAll().where('dataset_id', '=', dataset.id).where('is_current', '=', true).executeTakeFirst();
    return row ? this.decode(row) : null;
  }

  async history(dataset: Dataset): Promise<Contract[]> {
    const rows = await this.storage.db.selectFrom('dataset_contracts').selectAll().where('dataset_id', '=', dataset.id).orderBy('version', 'desc').execute();
    return rows.map((r) => this.decode(r));
  }

  /** Captures the live schema as the new current contract; the previous one stays in the history. */
  async capture(dataset: Dataset, userId: number): Promise<Contract> {
    return this.storage.transaction(async (trx) => {
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

  async drift(dataset: Dataset): Promise<Drift> {
    const contract = await this.current(dataset);
    return { ...computeDrift(contract?.columns ?? null, dataset.columns), contract_version: contract?.version ?? null, dataset_version: dataset.version };
  }
}
