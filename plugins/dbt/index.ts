import bytes from 'bytes';
import { definePlugin, defineRoute, identitySchemas as s, kernelServices, problems, reply, z } from '../../kernel/plugin-api.ts';
import { datasetCatalog } from '../datasets/public.ts';
import { qualityRules } from '../data_quality_rules/public.ts';
import { pipelineRecipes } from '../pipeline/public.ts';
import { projectCatalog } from '../projects/public.ts';
import { importManifest } from './importer.ts';
import { ImportStore, type DbtImport } from './import-store.ts';
import { dbtMigrations } from './migrations.ts';
import { IMPORT_SCHEMAS, IMPORT_TYPES, readImportRequest } from './request-body.ts';

const objectKind = z.enum(['dataset', 'recipe', 'rule']);
const importSchema = z
  .object({
    id: z.number().int(),
    project_id: z.number().int(),
    schema_version: z.number().int().describe('The manifest schema version read (7 to 12)'),
    dbt_version: z.string().nullable(),
    dbt_project: z.string().nullable().describe("The dbt project's name"),
    summary: z.object({
      datasets_created: z.number().int(),
      datasets_updated: z.number().int().describe('Datasets of an earlier import whose descriptions changed, and seeds or sources adopted from datasets already in the project'),
      recipes_created: z.number().int(),
      recipes_updated: z.number().int().describe("Models whose SQL or inputs changed since the last import: their recipes' new definition"),
      lineage_edges: z.number().int().describe("The models' dependencies, as inputs of their recipes"),
      rules_created: z.number().int(),
      skipped: z.array(z.object({ unique_id: z.string(), reason: z.string() })).describe('What was not imported, each with why'),
      removed: z.array(z.object({ unique_id: z.string(), kind: objectKind, ref_id: z.number().int() })).describe('What earlier imports made of resources no longer in the manifest: reported, left as it is'),
    }),
    created_by: z.number().int().nullable(),
    created_at: z.string(),
  })
  .meta({ id: 'DbtImport' });

const base = { security: 'bearer', orgScoped: true } as const;

/** The `dbt` router: imports of dbt projects (their manifest.json) as datasets, recipes and rules. */
export default definePlugin({
  deps: { storage: kernelServices.storage, config: kernelServices.config, logger: kernelServices.logger },
  migrations: dbtMigrations,
  init: ({ storage, config, logger }, ctx) => {
    const store = new ImportStore(storage);
    const deps = { catalog: ctx.useService(datasetCatalog), recipes: ctx.useService(pipelineRecipes), rules: ctx.useService(qualityRules), projects: ctx.useService(projectCatalog), store, logger };
    const limitBytes = bytes.parse(config.DBT_MANIFEST_LIMIT) ?? 50 * 1024 ** 2;

    return {
      routes: [
        defineRoute({
          ...base,
          method: 'post',
          path: '/imports',
          summary: 'Import a dbt project',
          description:
            "Reads a dbt `manifest.json` (schema v7 to v12; JSON body `{project_id, manifest, catalog?}` or a multipart form with `project_id` and the files `manifest` and `catalog`, at most DBT_MANIFEST_LIMIT): models, seeds, snapshots and sources become datasets, each SQL model a `sql` recipe over its `depends_on` datasets (its compiled SQL, else its Jinja rendered with ref, source, config, var, this and is_incremental() false; relations renamed to datasets; held to the governed-SQL rules), generic tests data-quality rules. What cannot be imported is listed in `summary.skipped` with the reason. Importing the same project again updates what changed, duplicates nothing, and reports what the manifest no longer has. Needs `datasets.write` and `pipeline.write` too.",
          capability: 'dbt.import',
          request: { stream: { contentTypes: IMPORT_TYPES, description: 'The manifest (and catalog) as JSON or as a multipart form', schemas: IMPORT_SCHEMAS } },
          responses: {
            201: { description: 'Imported', schema: importSchema },
            400: { description: 'The body, the manifest or the catalog is not JSON, not of their shape, or holds a NUL character (the field is named)' },
            403: { description: 'The caller lacks datasets.write or pipeline.write' },
            409: { description: 'Another import of the project is running' },
            413: { description: 'The body is larger than DBT_MANIFEST_LIMIT' },
            422: { description: 'An unknown manifest schema version (body.manifest.metadata.dbt_schema_version), or a project that does not exist here' },
          },
          handler: async ({ orgId, principal, audit, koa }) => {
            for (const needed of ['datasets.write', 'pipeline.write']) if (!principal.capabilities.has(needed)) throw problems.forbidden(`importing a dbt project creates datasets and recipes: it needs the capability "${needed}"`);
            const request = await readImportRequest(koa, limitBytes, config.DBT_MANIFEST_LIMIT);
            const done = await store.exclusively(orgId, request.projectId, () => importManifest(deps, orgId, principal, audit, request));
            const { skipped, removed, ...counts } = done.summary;
            await audit.record({ action: 'dbt.import', targetType: 'dbt_import', targetId: done.id, details: { project_id: done.project_id, ...counts, skipped: skipped.length, removed: removed.length } });
            return reply(201, done satisfies DbtImport);
          },
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/imports',
          summary: 'List dbt imports',
          description: "This organization's dbt imports (of one project with `project_id`), newest first, a page at a time: `limit` (1 to 500, default 50) per page, the next from `cursor` (the previous page's `next_cursor`, null after the last).",
          capability: 'dbt.read',
          request: {
            query: z.object({
              project_id: s.pathId.optional(),
              limit: z.coerce.number().int().min(1).max(500).default(50),
              cursor: z.string().max(200).optional().meta({ description: 'The `next_cursor` of the previous page' }),
            }),
          },
          responses: { 200: { description: 'A page of imports', schema: z.object({ items: z.array(importSchema), next_cursor: z.string().nullable() }).meta({ id: 'DbtImportPage' }) } },
          handler: async ({ query, orgId }) => store.list(orgId, query),
        }),
        defineRoute({
          ...base,
          method: 'get',
          path: '/imports/{id}',
          summary: 'Get a dbt import',
          description: 'One import of this organization, with its summary.',
          capability: 'dbt.read',
          request: { params: s.idParam('id') },
          responses: { 200: { description: 'The import', schema: importSchema } },
          handler: async ({ params, orgId }) => store.get(orgId, params.id),
        }),
      ],
    };
  },
});
