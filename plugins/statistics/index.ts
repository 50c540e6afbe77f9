import { sql, type RawBuilder } from 'kysely';
import { z } from 'zod';
import { definePlugin, defineRoute, identitySchemas as s, kernelServices, problems, type Principal } from '../../kernel/plugin-api.ts';
import { DATA_COLUMN_TYPES, type Storage } from '../../storage/index.ts';
import { datasetCatalog, DATASET_DELETED, dataValueSchema, type DatasetCatalog, type DatasetDeletedEvent, type DatasetInfo } from '../datasets/public.ts';
import { columnProfile, type ColumnProfile } from './profile.ts';

interface DatasetProfile {
  dataset_id: number;
  version: number;
  row_count: number;
  computed_at: string;
  columns: ColumnProfile[];
}

/** A min, max or quartile: a number, or the text of a date, timestamp or string. */
const orderedValue = z.union([z.number(), z.string()]).nullable();

const columnProfileSchema = z
  .object({
    name: z.string(),
    type: z.enum(DATA_COLUMN_TYPES),
    masked: z.boolean().describe('PII column: only counts are shown without datasets.pii.read'),
    count: z.number().int().describe('Values that are not null'),
    nulls: z.number().int(),
    distinct: z.number().int(),
    min: orderedValue.describe('Of ordered types (integer, number, date, timestamp, string); null otherwise, or when masked'),
    max: orderedValue.describe('Of ordered types (integer, number, date, timestamp, string); null otherwise, or when masked'),
    mean: z.number().nullable().describe('Of integer and number columns'),
    stddev: z.number().nullable().describe('Sample standard deviation, of integer and number columns with two values or more'),
    quantiles: z
      .object({ p25: orderedValue, p50: orderedValue, p75: orderedValue })
      .nullable()
      .describe('Nearest-rank quartiles, of ordered types (integer, number, date, timestamp, string)'),
    top_values: z.array(z.object({ value: dataValueSchema, count: z.number().int() })).describe('The most frequent values, most frequent first'),
    histogram: z
      .array(z.object({ from: z.number(), to: z.number(), count: z.number().int() }))
      .nullable()
      .describe('Of integer and number columns: equal-width buckets from min to max (the last one includes max), edges rounded to the precision of the data'),
  })
  .meta({ id: 'ColumnProfile' });

const datasetProfileSchema = z
  .object({
    dataset_id: z.number().int(),
    version: z.number().int(),
    row_count: z.number().int(),
    computed_at: z.string(),
    cached: z.boolean().describe('Served from the profile computed for this dataset version'),
    columns: z.array(columnProfileSchema),
  })
  .meta({ id: 'DatasetProfile' });

/** What a caller without `datasets.pii.read` may know about a PII column: how many values, no values. */
function masked(column: ColumnProfile): ColumnProfile & { masked: boolean } {
  return { ...column, masked: true, min: null, max: null, mean: null, stddev: null, quantiles: null, top_values: [], histogram: null };
}

/**
 * Profiles, computed in the database and kept per dataset version and row-policy scope: computed
 * once per version of the data and scope, served from the cache until the data changes. They are
 * computed as long reads (`Storage.longReads`): off the event loop, within the organization's turns.
 */
class ProfileCache {
  constructor(
    private readonly storage: Storage,
    private readonly catalog: DatasetCatalog,
  ) {}

  /** The profile of the rows within `scope` (row policies), computed once per dataset version and scope. */
  async get(dataset: DatasetInfo, scope: { condition: RawBuilder<boolean> | null; key: string }): Promise<{ profile: DatasetProfile; cached: boolean }> {
    const { storage } = this;
    const row = await storage.db.selectFrom('dataset_profiles').selectAll().where('dataset_id', '=', dataset.id).where('scope_key', '=', scope.key).executeTakeFirst();
    if (row && Number(row.version) === dataset.version) return { profile: storage.decodeJson<DatasetProfile>(row.profile), cached: true };
    const table = this.catalog.table(dataset);
    const source = scope.condition ? sql`(select * from ${table} where ${scope.condition}) as scoped` : table;
    const reads = storage.longReads(dataset.org_id);
    const [rowCount, statistics] = await Promise.all([
      scope.condition ? sql<{ n: unknown }>`select count(*) as n from ${source}`.execute(reads).then(({ rows }) => Number(rows[0].n)) : dataset.row_count,
      storage.dataTables.profile(reads, source, dataset.columns),
    ]);
    const columns = dataset.columns.map((column, i) => columnProfile(column, statistics[i], rowCount, this.catalog.decode));
    const profile: DatasetProfile = { dataset_id: dataset.id, version: dataset.version, row_count: rowCount, computed_at: storage.now(), columns };
    const values = { version: dataset.version, profile: storage.encodeJson(profile), computed_at: profile.computed_at };
    await storage.db
      .insertInto('dataset_profiles')
      .values({ dataset_id: dataset.id, scope_key: scope.key, org_id: dataset.org_id, ...values })
      .onConflict((oc) => oc.columns(['dataset_id', 'scope_key']).doUpdateSet(values))
      .execute();
    return { profile, cached: false };
  }
}

/** The `statistics` router: dataset and column profiles. */
export default definePlugin({
  deps: { storage: kernelServices.storage, events: kernelServices.events },
  migrations: {
    '2026-11-22T0400_profiles': {
      async up({ db, storage }) {
        await db.schema
          .createTable('dataset_profiles')
          .addColumn('dataset_id', 'integer', (c) => c.primaryKey())
          .addColumn('org_id', 'integer', (c) => c.notNull())
          .addColumn('version', 'integer', (c) => c.notNull())
          .addColumn('profile', storage.types.json, (c) => c.notNull())
          .addColumn('computed_at', storage.types.timestamp, (c) => c.notNull())
          .execute();
      },
      async down({ db }) {
        await db.schema.dropTable('dataset_profiles').execute();
      },
    },
    // Profiles become per row-policy scope: the cache is rebuilt keyed by (dataset, scope).
    '2026-11-22T0700_profiles_per_scope': {
      async up({ db, storage }) {
        await db.schema.dropTable('dataset_profiles').execute();
        await db.schema
          .createTable('dataset_profiles')
          .addColumn('dataset_id', 'integer', (c) => c.notNull())
          .addColumn('scope_key', 'text', (c) => c.notNull())
          .addColumn('org_id', 'integer', (c) => c.notNull())
          .addColumn('version', 'integer', (c) => c.notNull())
          .addColumn('profile', storage.types.json, (c) => c.notNull())
          .addColumn('computed_at', storage.types.timestamp, (c) => c.notNull())
          .addPrimaryKeyConstraint('dataset_profiles_pk', ['dataset_id', 'scope_key'])
          .execute();
      },
      async down({ db, storage }) {
        await db.schema.dropTable('dataset_profiles').execute();
        await db.schema
          .createTable('dataset_profiles')
          .addColumn('dataset_id', 'integer', (c) => c.primaryKey())
          .addColumn('org_id', 'integer', (c) => c.notNull())
          .addColumn('version', 'integer', (c) => c.notNull())
          .addColumn('profile', storage.types.json, (c) => c.notNull())
          .addColumn('computed_at', storage.types.timestamp, (c) => c.notNull())
          .execute();
      },
    },
  },
  init: ({ storage, events }, ctx) => {
    const catalog = ctx.useService(datasetCatalog);
    const cache = new ProfileCache(storage, catalog);
    events.subscribe('dataset-deleted', {
      types: [DATASET_DELETED],
      async handle(event) {
        const { dataset_id } = event.payload as DatasetDeletedEvent;
        await storage.db.deleteFrom('dataset_profiles').where('dataset_id', '=', dataset_id).execute();
      },
    });
    const view = async (orgId: number, id: number, principal: Principal) => {
      const dataset = await catalog.get(orgId, id);
      const { profile, cached } = await cache.get(dataset, await catalog.scope(principal, dataset));
      const seePii = catalog.seesPii(principal);
      const pii = new Set(dataset.columns.filter((c) => c.pii).map((c) => c.name));
      return { ...profile, cached, columns: profile.columns.map((c) => (pii.has(c.name) && !seePii ? masked(c) : { ...c, masked: false })) };
    };
    const base = { security: 'bearer', orgScoped: true, capability: 'datasets.read' } as const;
    return {
      routes: [
        defineRoute({
          ...base,
          method: 'get',
          path: '/datasets/{id}',
          summary: 'Profile of a dataset: per column counts, nulls, distinct, range, mean, stddev, quartiles, top values, histogram',
          description:
            'Computed in the database over every row and cached per dataset version: a repeat call is answered from the cache until the data changes. Per column: counts, nulls, distinct values and, by type, range, mean, standard deviation, quartiles, top values and a histogram. PII columns need `datasets.pii.read` to be profiled.',
          request: { params: s.idParam('id') },
          responses: { 200: { description: 'The profile', schema: datasetProfileSchema } },
          handler: ({ params, orgId, principal }) => view(orgId, params.id, principal),
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/datasets/{id}/columns/{column}',
          summary: 'Profile of one column',
          description:
            'The profile of a single column, computed and cached as the dataset profile is. A column the dataset lacks is a 404.',
          request: { params: z.object({ id: s.pathId, column: z.string().min(1) }) },
          responses: { 200: { description: 'The column profile', schema: columnProfileSchema } },
          handler: async ({ params, orgId, principal }) => {
            const profile = await view(orgId, params.id, principal);
            const column = profile.columns.find((c) => c.name === params.column);
            if (!column) throw problems.notFound(`dataset ${params.id} has no column "${params.column}"`);
            return column;
          },
        }),
      ],
    };
  },
});
