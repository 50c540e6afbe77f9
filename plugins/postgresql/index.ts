import { z } from 'zod';
import { definePlugin, identitySchemas as s, kernelServices, problems } from '../../kernel/plugin-api.ts';
import { quoteIdentifier } from '../../storage/index.ts';
import { connectorTypes } from '../connectors/public.ts';
import { datasetCatalog } from '../datasets/public.ts';
import { CONNECTION_URL_MESSAGE, parseConnectionUrl } from './connection-url.ts';
import { readOnlyQuery } from './read-only-query.ts';
import { readQuery, withSource, type SourceConfig } from './source.ts';

/** The connection fields, from the URL when the connector was configured with one. */
function sourceConfig(config: Record<string, unknown>): SourceConfig {
  if (typeof config.url !== 'string') return config as unknown as SourceConfig;
  const parsed = parseConnectionUrl(config.url);
  // Only a connector saved before its URL was checked gets here with a bad one; the URL is never echoed.
  if (!parsed) throw problems.badRequest(`config.url of this connector ${CONNECTION_URL_MESSAGE}: set it again`, [{ path: 'config.url', message: CONNECTION_URL_MESSAGE }]);
  const { sslmode, ...fields } = parsed;
  return { ...fields, ssl: sslmode !== null && sslmode !== 'disable' ? true : Boolean(config.ssl) };
}

const identifier = z.string().regex(/^[A-Za-z_][A-Za-z0-9_$]*$/, 'must be a plain identifier');

/**
 * `postgresql`: a data connector to an external Postgres. `test`, `list_tables`, and `import` of a
 * table or a read-only query into a dataset (streamed through a cursor, loaded all or nothing).
 */
export default definePlugin({
  deps: { outbound: kernelServices.outbound },
  init: ({ outbound }, ctx) => {
    const datasets = ctx.useService(datasetCatalog);
    const open = async <T>(config: Record<string, unknown>, work: Parameters<typeof withSource<T>>[2]) => {
      const source = sourceConfig(config);
      const [address] = await outbound.resolve(source.host);
      return withSource(source, address, work);
    };
    ctx.contribute(connectorTypes, {
      type: 'postgresql',
      description: 'Reads tables and queries of an external PostgreSQL database into datasets',
      config: z
        .object({
          url: z
            .string()
            .max(4096)
            .refine((url) => parseConnectionUrl(url) !== null, CONNECTION_URL_MESSAGE)
            .optional(),
          host: z.string().min(1).max(255).optional(),
          port: z.number().int().min(1).max(65535).default(5432),
          database: z.string().min(1).max(63).optional(),
          user: z.string().min(1).max(63).optional(),
          password: z.string().max(1024).optional(),
          ssl: z.boolean().default(false),
        })
        .strict()
        .refine((c) => (c.url !== undefined) !== (c.host !== undefined && c.database !== undefined && c.user !== undefined), {
          message: 'give either url, or host, database and user',
          path: ['url'],
        }),
      // The URL may carry the password.
      secretFields: ['password', 'url'],
      // Where the password goes; with TLS turned off, the network path can read it too.
      targetFields: ['url', 'host', 'port', 'ssl'],
      async test(config) {
        const version = await open(config, async (client) => (await client.query('select version() as v')).rows[0].v as string);
        return { ok: true, message: `connected: ${version.split(',')[0]}` };
      },
      actions: {
        list_tables: {
          description: 'Tables and views of the database (system schemas left out)',
          args: z.object({}).strict(),
          async run({ config }) {
            const rows = await open(config, async (client) =>
              (await client.query(`select table_schema as schema, table_name as name, table_type as kind from information_schema.tables
                 where table_schema not in ('pg_catalog', 'information_schema') order by 1, 2`)).rows,
            );
            return { body: rows };
          },
        },
        import: {
          description: 'Import a table (schema.name) or a read-only query into a dataset of the organization',
          args: z
            .object({
              dataset_id: s.recordId,
              table: z.object({ schema: identifier.default('public'), name: identifier }).strict().optional(),
              query: z.string().min(1).max(100_000).optional(),
              mode: z.enum(['append', 'replace']).default('replace'),
            })
            .strict()
            .refine((a) => (a.table === undefined) !== (a.query === undefined), 'give either table or query'),
          async run({ config, args, orgId, principal, audit }) {
            if (!principal.capabilities.has('datasets.write')) throw problems.forbidden('importing into a dataset needs the capability "datasets.write"');
            const dataset = await datasets.get(orgId, args.dataset_id);
            const text = args.table ? `select * from ${quoteIdentifier(args.table.schema)}.${quoteIdentifier(args.table.name)}` : await readOnlyQuery(args.query!);
            const result = await open(config, async (client) => {
              let source;
              try {
                source = await readQuery(client, text);
              } catch (err) {
                throw problems.unprocessable(`the source refused the import: ${(err as Error).message}`, [{ path: args.table ? 'body.table' : 'body.query', message: (err as Error).message }]);
              }
              if (args.mode === 'append' && dataset.columns.length) {
                const mismatch = source.columns.find((c) => dataset.columns.find((d) => d.name === c.name)?.type !== c.type);
                if (mismatch) throw problems.unprocessable(`source column "${mismatch.name}" (${mismatch.type}) does not match a column of the dataset`, [{ path: 'body', message: `column ${mismatch.name}` }]);
                const order = dataset.columns.map((d) => source.columns.findIndex((c) => c.name === d.name));
                const reorder = async function* () {
                  for await (const batch of source.batches) yield batch.map((row) => order.map((i) => (i === -1 ? null : row[i])));
                };
                return datasets.load(dataset, dataset.columns, reorder(), 'append');
              }
              return datasets.load(dataset, source.columns, source.batches, args.mode);
            });
            await audit.record({ action: 'dataset.data.load', targetType: 'dataset', targetId: dataset.id, details: { mode: args.mode, rows: result.loaded, format: 'postgresql' } });
            return { body: { dataset_id: dataset.id, rows_loaded: result.loaded, version: result.dataset.version, columns: result.dataset.columns } };
          },
        },
      },
    });
  },
});
