import bytes from 'bytes';
import { z } from 'zod';
import { defineRoute, identitySchemas as s, kernelServices, problems, reply, type ServiceType } from '../../kernel/plugin-api.ts';
import { exportStream } from './export.ts';
import type { DataColumn } from '../../storage/index.ts';
import type { CsvLimits } from './csv-field-limit.ts';
import { readCsv } from './csv-reader.ts';
import { csvRows } from './csv-ingest.ts';
import type { Dataset, DatasetColumn, DatasetStore, NewDataset } from './dataset-store.ts';
import type { DatasetLoader } from './loader.ts';
import { FILTER_OPERATORS } from './filters.ts';
import { ROWS_PAGE_MAX, type DatasetCatalog } from './public.ts';
import { seesPii, visibilityOf } from './rows-query.ts';
import type { RowPolicies } from './row-policies.ts';
import { datasetName, datasetSchema, newDatasetInput, exportRowsSchema, loadResultSchema, rowsPageSchema } from './schemas.ts';
import { UPLOAD_SCHEMAS, UPLOAD_TYPES, uploadedFile } from './upload.ts';
import { parseJsonValue, ValueError } from './values.ts';

export interface DatasetRouteDeps {
  store: DatasetStore;
  policies: RowPolicies;
  /** The rows read path, shared with the `datasets.catalog` service. */
  readRows: DatasetCatalog['rows'];
  loader: DatasetLoader;
  storage: ServiceType<typeof kernelServices.storage>;
  uploadLimitBytes: number;
  /** CSV_MAX_FIELD_BYTES and CSV_MAX_RECORD_BYTES */
  csvLimits: CsvLimits;
  /** SQL_MAX_RESULT_BYTES: the values one page of rows (or of an export) may carry. */
  maxPageBytes: number;
  /** Deletes a dataset, the `datasets.deleted` event published in the same transaction (shared with the `datasets.catalog` service). */
  removeDataset: (orgId: number, id: number) => Promise<Dataset>;
}

/** The API view of a dataset: the physical table name stays inside the platform. */
const publicDataset = ({ table_name: _table, created_by: _by, ...dataset }: Dataset) => dataset;

const idParams = s.idParam('id');

/** The rows query language, each parameter described with an example (zod-to-openapi takes `example` from `.meta`). */
const rowsQuerySchema = z.object({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(ROWS_PAGE_MAX)
    .default(100)
    .meta({ description: `Rows per page, 1 to ${ROWS_PAGE_MAX} (a page also stops early at SQL_MAX_RESULT_BYTES of values)`, example: 50 }),
  cursor: z.string().max(200).optional().meta({ description: 'The `next_cursor` of the previous page, to read the next one (the other parameters unchanged)', example: 'eyJhZnRlciI6MTAwfQ' }),
  offset: z.coerce.number().int().min(0).optional().meta({ description: 'Rows to skip, for paging by number instead of by cursor', example: 200 }),
  sort: z
    .string()
    .max(1000)
    .optional()
    .meta({ description: 'Comma-separated column names to sort by, each ascending or, with a leading `-`, descending; default: the order of arrival', example: 'city,-amount' }),
  columns: z.string().max(10_000).optional().meta({ description: 'Comma-separated column names to answer, in this order; default: every column', example: 'id,city,amount' }),
  filter: z
    .union([z.string(), z.array(z.string())])
    .optional()
    .transform((v) => (v === undefined ? [] : Array.isArray(v) ? v : [v]))
    .meta({
      description: `\`column:operator:value\`, repeatable (every filter must hold). Operators: ${FILTER_OPERATORS.join(', ')}; \`in\` takes comma-separated values, \`is_null\` true or false, \`contains\` a substring`,
      example: ['amount:gte:100', 'city:in:Lyon,Paris'],
    }),
});
const base = { security: 'bearer', orgScoped: true } as const;

export function datasetRoutes({ store, policies, readRows, loader, storage, uploadLimitBytes, csvLimits, maxPageBytes, removeDataset }: DatasetRouteDeps) {
  return [
    defineRoute({
      ...base,
      method: 'post',
      path: '',
      summary: 'Create a dataset in a project (with a schema, or empty until its first upload)',
      description:
        'The dataset is a real table in the organization\'s storage. Give `columns` to declare its schema now, or none to take it from the first CSV upload. Names are unique in the organization (409).',
      capability: 'datasets.write',
      request: { body: newDatasetInput },
      responses: { 201: { description: 'The dataset', schema: datasetSchema }, 409: { description: 'A dataset with this name already exists in the organization' }, 422: { description: 'The project (`project_id`) does not exist in the organization' } },
      handler: async ({ body, orgId, principal, audit }) => {
        const dataset = await store.create(orgId, body as NewDataset, principal.userId);
        await audit.record({ action: 'dataset.create', targetType: 'dataset', targetId: dataset.id, details: { name: dataset.name, project_id: dataset.project_id } });
        return reply(201, publicDataset(dataset));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '',
      summary: 'Datasets of the current organization, paged, with search',
      description:
        'Datasets of the current organization with their schema and row counts; `q` searches by name, `limit` and `offset` page.',
      capability: 'datasets.read',
      request: {
        query: z.object({
          limit: z.coerce.number().int().min(1).max(500).default(50),
          offset: z.coerce.number().int().min(0).default(0),
          search: z.string().trim().min(1).max(200).optional(),
          project_id: s.pathId.optional(),
        }),
      },
      responses: { 200: { description: 'A page of datasets', schema: z.object({ items: z.array(datasetSchema), total: z.number().int(), limit: z.number().int(), offset: z.number().int() }) } },
      handler: async ({ query, orgId }) => {
        const { items, total } = await store.list(orgId, query);
        return { items: items.map(publicDataset), total, limit: query.limit, offset: query.offset };
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}',
      summary: 'One dataset: schema, row count, version',
      description:
        'The dataset\'s columns (name, type, description, PII flag), row count and version; the version grows with every change of data or schema. A dataset of another organization is a 404.',
      capability: 'datasets.read',
      request: { params: idParams },
      responses: { 200: { description: 'The dataset', schema: datasetSchema } },
      handler: async ({ params, orgId }) => publicDataset(await store.get(orgId, params.id)),
    }),
    defineRoute({
      ...base,
      method: 'patch',
      path: '/{id}',
      summary: 'Rename a dataset, change descriptions or PII flags (column names and types stay)',
      description:
        'Renames the dataset, changes its description and column descriptions, and sets PII flags (an unknown column is a 400). Clearing a PII flag needs `datasets.pii.read` (403). Column names and types never change here.',
      capability: 'datasets.write',
      request: {
        params: idParams,
        body: z
          .object({
            name: datasetName.optional(),
            description: z.string().max(5000).nullable().optional(),
            columns: z.array(z.object({ name: z.string(), pii: z.boolean().optional(), description: z.string().max(2000).nullable().optional() })).optional(),
          })
          .refine((b) => Object.keys(b).length > 0, 'give at least one field to change'),
      },
      responses: { 200: { description: 'The dataset', schema: datasetSchema }, 409: { description: 'A dataset with this name already exists in the organization' } },
      handler: async ({ params, body, orgId, principal, audit }) => {
        let piiChanges: { column: string; pii: boolean }[] = [];
        // Decided on the columns as they are when written (the store runs this again if they moved).
        const updated = await store.update(orgId, params.id, async (dataset) => {
          let columns: DatasetColumn[] | undefined;
          if (body.columns) {
            columns = dataset.columns.map((c) => ({ ...c }));
            body.columns.forEach((change, i) => {
              const column = columns!.find((c) => c.name === change.name);
              if (!column) throw problems.badRequest(`unknown column "${change.name}"`, [{ path: `body.columns.${i}.name`, message: 'not a column of the dataset' }]);
              if (change.pii !== undefined) column.pii = change.pii;
              if (change.description !== undefined) column.description = change.description;
            });
          }
          // What the flags end as, whatever the order or repetition of the changes asked.
          piiChanges = (columns ?? []).filter((c, i) => Boolean(c.pii) !== Boolean(dataset.columns[i].pii)).map((c) => ({ column: c.name, pii: Boolean(c.pii) }));
          // Unflagging shows the values to everyone who reads the dataset: only someone who may read
          // them decides that. Flagging only hides more (as creating a dataset with PII columns does).
          const unflagged = piiChanges.filter((c) => !c.pii).map((c) => c.column);
          if (unflagged.length && !seesPii(principal)) {
            for (const column of unflagged) await audit.record({ security: true, action: 'dataset.pii.unflag', outcome: 'failure', targetType: 'dataset', targetId: dataset.id, details: { column, reason: 'lacks datasets.pii.read' } });
            throw problems.forbidden(`removing the PII flag of ${unflagged.map((c) => `"${c}"`).join(', ')} needs the capability "datasets.pii.read"`);
          }
          return { name: body.name, description: body.description, columns };
        });
        await audit.record({ action: 'dataset.update', targetType: 'dataset', targetId: updated.id, details: { changes: Object.keys(body) } });
        for (const { column, pii } of piiChanges) await audit.record({ action: pii ? 'dataset.pii.flag' : 'dataset.pii.unflag', targetType: 'dataset', targetId: updated.id, details: { column } });
        return publicDataset(updated);
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/{id}',
      summary: 'Delete a dataset and its data',
      description:
        'Drops the dataset\'s table and its data. Cannot be undone.',
      capability: 'datasets.write',
      request: { params: idParams },
      responses: { 204: { description: 'Deleted' } },
      handler: async ({ params, orgId, audit }) => {
        const dataset = await removeDataset(orgId, params.id);
        await audit.record({ action: 'dataset.delete', targetType: 'dataset', targetId: dataset.id, details: { name: dataset.name } });
        return reply(204);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/{id}/data',
      summary: 'Upload CSV (streamed): append to or replace the data, all or nothing',
      description:
        'Body: the CSV itself (text/csv) or a multipart form with a `file` field. The first line is the header. `append` maps the header to the existing columns; `replace` takes the header as the new schema (known columns keep their type, new ones are inferred from the first 1000 rows, absent ones are dropped). A malformed file or a value that does not fit its column is refused naming the line and column, and the dataset is left as it was.',
      capability: 'datasets.write',
      request: {
        params: idParams,
        query: z.object({
          mode: z
            .enum(['append', 'replace'])
            .default('append')
            .describe('`append` (the default) adds the rows to the existing columns; `replace` takes the header as the new schema and replaces the data'),
        }),
        stream: { contentTypes: UPLOAD_TYPES, description: 'A CSV file with a header line (UTF-8)', schemas: UPLOAD_SCHEMAS },
      },
      responses: {
        422: { description: 'A value does not fit its column, a field is too long, or the header has too many columns (the detail names the line and column); nothing was loaded' },
        200: { description: 'The dataset after the load', schema: loadResultSchema },
        413: { description: 'The upload is larger than DATASET_UPLOAD_LIMIT; nothing was loaded' },
      },
      handler: async ({ params, query, orgId, koa, audit }) => {
        const dataset = await store.get(orgId, params.id);
        const records = readCsv(await uploadedFile(koa), uploadLimitBytes, csvLimits);
        try {
          const { columns, batches } = await csvRows(records, dataset.columns, query.mode);
          const { dataset: after, loaded } = await loader.load(dataset, columns, batches, query.mode);
          await audit.record({ action: 'dataset.data.load', targetType: 'dataset', targetId: dataset.id, details: { mode: query.mode, rows: loaded, format: 'csv' } });
          return { dataset: publicDataset(after), rows_loaded: loaded };
        } finally {
          // Refused before the reader got to the end (a bad header, a sample row): the reader still drains
          // the upload, or the client would get a connection reset instead of the answer.
          await records.return(undefined);
        }
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/{id}/rows',
      summary: 'Append rows given as a JSON array of objects, all or nothing',
      description:
        'Each row is an object keyed by column name; values are converted to the column types. One bad row (an unknown column, a value of the wrong type) refuses the whole batch with a 422 naming the row and column; a dataset with no columns yet is a 422 too.',
      capability: 'datasets.write',
      request: { params: idParams, body: z.array(z.record(z.string(), z.unknown())).min(1).max(10_000) },
      responses: { 200: { description: 'The dataset after the load', schema: loadResultSchema }, 422: { description: 'The dataset has no columns yet, or a row names an unknown column or holds a value that does not fit its column; nothing was loaded' } },
      handler: async ({ params, body, orgId, audit }) => {
        const dataset = await store.get(orgId, params.id);
        if (dataset.columns.length === 0) throw problems.unprocessable('the dataset has no columns yet: declare them or upload a CSV first');
        const columns: DataColumn[] = dataset.columns.map(({ name, type }) => ({ name, type }));
        const rows = body.map((object, index) => {
          const unknown = Object.keys(object).find((key) => !columns.some((c) => c.name === key));
          if (unknown !== undefined) throw problems.unprocessable(`row ${index}: "${unknown}" is not a column of the dataset`, [{ path: `body.${index}.${unknown}`, message: 'unknown column' }]);
          return columns.map((c) => {
            try {
              // Own keys only: a column named `constructor` or `toString` missing from the row is null.
              return parseJsonValue(c.type, Object.hasOwn(object, c.name) ? object[c.name] : undefined);
            } catch (err) {
              if (err instanceof ValueError) throw problems.unprocessable(`row ${index}, column "${c.name}": ${err.message}`, [{ path: `body.${index}.${c.name}`, message: err.message }]);
              throw err;
            }
          });
        });
        const { dataset: after, loaded } = await loader.load(dataset, columns, [rows], 'append');
        await audit.record({ action: 'dataset.data.load', targetType: 'dataset', targetId: dataset.id, details: { mode: 'append', rows: loaded, format: 'json' } });
        return { dataset: publicDataset(after), rows_loaded: loaded };
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}/rows',
      summary: 'Read rows: column selection, filters, sort, cursor or offset paging',
      description: `filter=column:operator:value, repeatable; operators: ${FILTER_OPERATORS.join(', ')} (in: comma-separated values; is_null: true or false). sort=col,-other.`,
      capability: 'datasets.read',
      request: { params: idParams, query: rowsQuerySchema },
      responses: { 200: { description: 'A page of rows', schema: rowsPageSchema } },
      handler: async ({ params, query, orgId, principal }) => readRows(principal, orgId, params.id, query),
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/{id}/export',
      summary: 'Export every row as CSV or JSON, streamed',
      description:
        'Streams every row the caller may see (the row policies of their groups apply) as CSV with a header line (`format=csv`, the default) or as a JSON array of objects (`format=json`), with a Content-Disposition file name. Audited as `dataset.export`.',
      capability: 'datasets.read',
      request: { params: idParams, query: z.object({ format: z.enum(['csv', 'json']).default('csv') }) },
      responses: {
        200: {
          description: 'The rows: CSV with a header line (`format=csv`), or a JSON array of objects (`format=json`)',
          content: { 'text/csv': z.string().describe('CSV with a header line (RFC 4180)'), 'application/json': exportRowsSchema },
        },
      },
      handler: async ({ params, query, orgId, principal, audit }) => {
        const dataset = await store.get(orgId, params.id);
        await audit.record({ action: 'dataset.export', targetType: 'dataset', targetId: dataset.id, details: { format: query.format, rows: dataset.row_count } });
        const type = query.format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json; charset=utf-8';
        return reply(200, exportStream(storage, dataset, query.format, await visibilityOf(policies, principal, dataset), maxPageBytes), {
          'Content-Type': type,
          'Content-Disposition': `attachment; filename="${dataset.name}.${query.format}"`,
        });
      },
    }),
  ];
}

export const parseUploadLimit = (text: string) => bytes.parse(text) ?? 2 * 1024 ** 3;
