import { sql, type RawBuilder } from 'kysely';
import { problems, type Principal, type ServiceType, type kernelServices } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { Dataset } from './dataset-store.ts';
import { columnLookup, compileFilter } from './filters.ts';

export interface RowPolicy {
  id: number;
  dataset_id: number;
  group_id: number;
  filters: string[];
  description: string | null;
  created_at: string;
}

/** The rows a caller may read: a condition (null: every row) and a key naming it, for caches. */
export interface RowScope {
  condition: RawBuilder<boolean> | null;
  key: string;
}

/** Holders see every row whatever the policies (platform admins hold every capability). */
export const BYPASS_CAPABILITY = 'datasets.policies.bypass';
const NOTHING = sql<boolean>`1 = 0`;

/**
 * Row policies: a dataset with policies shows each member of a policy's group only the rows its
 * filters match (filters of one policy are ANDed, policies of several groups ORed); a caller in
 * none of the groups sees no row. One service for every read path: rows, export, SQL, statistics,
 * quality checks.
 */
export class RowPolicies {
  constructor(
    private readonly storage: Storage,
    private readonly groups: ServiceType<typeof kernelServices.groups>,
  ) {}

  private decode = (row: Record<string, unknown>): RowPolicy => ({ ...(row as unknown as RowPolicy), filters: this.storage.decodeJson<string[]>(row.filters) });

  async list(dataset: Dataset): Promise<RowPolicy[]> {
    const rows = await this.storage.db.selectFrom('row_policies').selectAll().where('dataset_id', '=', dataset.id).where('org_id', '=', dataset.org_id).orderBy('id').execute();
    return rows.map(this.decode);
  }

  async create(dataset: Dataset, input: { group_id: number; filters: string[]; description?: string | null }): Promise<RowPolicy> {
    await this.groups.get(dataset.org_id, input.group_id).catch(() => {
      throw problems.unprocessable(`group ${input.group_id} does not exist in this organization`, [{ path: 'body.group_id', message: 'no such group' }]);
    });
    const column = columnLookup(dataset.columns);
    input.filters.forEach((filter, i) => compileFilter(filter, (name) => column(name, `body.filters.${i}`), `body.filters.${i}`));
    const row = await this.storage.db
      .insertInto('row_policies')
      .values({ dataset_id: dataset.id, org_id: dataset.org_id, group_id: input.group_id, filters: this.storage.encodeJson(input.filters), description: input.description ?? null, created_at: this.storage.now() })
      .returningAll()
      .executeTakeFirstOrThrow();
    return this.decode(row);
  }

  async remove(dataset: Dataset, id: number): Promise<void> {
    const removed = await this.storage.db.deleteFrom('row_policies').where('id', '=', id).where('dataset_id', '=', dataset.id).where('org_id', '=', dataset.org_id).executeTakeFirst();
    if (Number(removed.numDeletedRows) === 0) throw problems.notFound(`no row policy ${id} on dataset ${dataset.id}`);
  }

  async scope(principal: Principal, dataset: Dataset): Promise<RowScope> {
    if (principal.capabilities.has(BYPASS_CAPABILITY)) return { condition: null, key: 'all' };
    const policies = await this.list(dataset);
    if (policies.length === 0) return { condition: null, key: 'all' };
    const mine = new Set((await this.groups.list(dataset.org_id, principal.userId)).map((g) => g.id));
    const applicable = policies.filter((p) => mine.has(p.group_id));
    if (applicable.length === 0) return { condition: NOTHING, key: 'none' };
    const column = columnLookup(dataset.columns);
    const lookup = (name: string) => column(name, 'policy');
    const conditions = applicable.map((policy) => {
      try {
        const parts = policy.filters.map((filter) => compileFilter(filter, lookup, 'policy'));
        return parts.length ? sql<boolean>`(${sql.join(parts, sql` and `)})` : sql<boolean>`1 = 1`;
      } catch {
        return NOTHING; // a policy naming a column the dataset lost fails closed
      }
    });
    return { condition: sql<boolean>`(${sql.join(conditions, sql` or `)})`, key: `policies:${applicable.map((p) => p.id).join(',')}` };
  }
}
