import { sql, type RawBuilder } from 'kysely';
import { actingUser, andThen, problems, type Maybe, type Principal, type ServiceType, type kernelServices } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { Dataset } from './dataset-store.ts';
import { columnLookup, compileFilter } from './filters.ts';
import { ROW_POLICIES_COUNTER } from './migrations.ts';
import { ROW_POLICY_BYPASS } from './public.ts';

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

const NOTHING = sql<boolean>`1 = 0`;
/** Holders of the bypass, and readers of a dataset without policies, see every row (platform admins hold every capability). */
const EVERY_ROW: RowScope = Object.freeze({ condition: null, key: 'all' });
/** A caller in none of the policies' groups sees no row. */
const NO_ROW: RowScope = Object.freeze({ condition: NOTHING, key: 'none' });

/** Datasets whose compiled policies are kept at most; the oldest go first. */
const COMPILED_KEPT = 5_000;

/** A dataset's policies with their filters compiled, valid for one version and schema of the dataset. */
interface CompiledPolicies {
  datasetState: string;
  policies: { id: number; groupId: number; condition: RawBuilder<boolean> }[];
}

/**
 * Row policies: a dataset with policies shows each member of a policy's group only the rows its
 * filters match (filters of one policy are ANDed, policies of several groups ORed); a caller in
 * none of the groups sees no row. One service for every read path: rows, export, SQL, statistics,
 * quality checks.
 *
 * Compiled policies are cached per dataset, keyed by the dataset's version and last update (a new
 * schema recompiles them) and dropped whenever the database's row-policy change counter moves (a
 * policy created or removed through any instance, or a group deleted with its policies); the
 * caller's groups come from the identity snapshot. A read path asks no query of its own.
 */
export class RowPolicies {
  private readonly compiled = new Map<number, CompiledPolicies>();
  private counter: number | undefined;

  constructor(
    private readonly storage: Storage,
    private readonly groups: ServiceType<typeof kernelServices.groups>,
    private readonly identity: ServiceType<typeof kernelServices.identity>,
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

  scope(principal: Principal, dataset: Dataset): Maybe<RowScope> {
    if (principal.capabilities.has(ROW_POLICY_BYPASS)) return EVERY_ROW;
    return andThen(this.compiledFor(dataset), ({ policies }) => {
      if (policies.length === 0) return EVERY_ROW;
      // The groups of the user who acts (a run: the user it acts for); an API key is in none, so it sees nothing a policy guards.
      const user = actingUser(principal);
      if (!user) return NO_ROW;
      return andThen(this.identity.groupsOf(user.userId, dataset.org_id), (groups) => {
        const applicable = policies.filter((p) => groups.some((g) => g.id === p.groupId));
        if (applicable.length === 0) return NO_ROW;
        return { condition: sql<boolean>`(${sql.join(applicable.map((p) => p.condition), sql` or `)})`, key: `policies:${applicable.map((p) => p.id).join(',')}` };
      });
    });
  }

  private compiledFor(dataset: Dataset): Maybe<CompiledPolicies> {
    return andThen(this.storage.changeCounter(ROW_POLICIES_COUNTER), (counter) => {
      if (counter !== this.counter) {
        this.compiled.clear();
        this.counter = counter;
      }
      const datasetState = `${dataset.version}@${dataset.updated_at}`;
      const cached = this.compiled.get(dataset.id);
      if (cached?.datasetState === datasetState) return cached;
      return this.list(dataset).then((listed) => {
        const compiled = { datasetState, policies: this.compile(dataset, listed) };
        // Kept only if no policy changed while they were read (a newer counter cleared the cache).
        if (this.counter === counter) {
          this.compiled.delete(dataset.id);
          if (this.compiled.size >= COMPILED_KEPT) this.compiled.delete(this.compiled.keys().next().value!);
          this.compiled.set(dataset.id, compiled);
        }
        return compiled;
      });
    });
  }

  private compile(dataset: Dataset, policies: RowPolicy[]): CompiledPolicies['policies'] {
    const column = columnLookup(dataset.columns);
    const lookup = (name: string) => column(name, 'policy');
    return policies.map((policy) => {
      let condition: RawBuilder<boolean>;
      try {
        const parts = policy.filters.map((filter) => compileFilter(filter, lookup, 'policy'));
        condition = parts.length ? sql<boolean>`(${sql.join(parts, sql` and `)})` : sql<boolean>`1 = 1`;
      } catch {
        condition = NOTHING; // a policy naming a column the dataset lost fails closed
      }
      return { id: policy.id, groupId: policy.group_id, condition };
    });
  }
}
