import crypto from 'node:crypto';
import { z } from 'zod';
import { definePlugin, defineRoute, HttpProblem, kernelServices, problems, type Principal, type RequestAudit } from '../../kernel/plugin-api.ts';
import { GovernedSqlUnavailableError, QueryRejectedError, QueryTimeoutError, SelectRefusedError, type GovernedDataset, type GovernedSelect } from '../../storage/index.ts';
import { datasetCatalog, dataValueSchema, PII_MASK } from '../datasets/public.ts';
import { governedSql, QUERY_REJECTED, QUERY_TIMED_OUT } from './public.ts';

export const MAX_ROWS = 10_000;
export const MAX_TIMEOUT_MS = 300_000;

const refused = (message: string) => problems.badRequest(message, [{ path: 'body.sql', message }]);

/** The `sql` router: governed, read-only SQL over the current organization's datasets. */
export default definePlugin({
  deps: { storage: kernelServices.storage, config: kernelServices.config },
  init: ({ storage, config }, ctx) => {
    const catalog = ctx.useService(datasetCatalog);

    /** The statement checked, and the datasets it reads by the names it reads them by. */
    async function resolve(text: string, orgId: number) {
      let parsed: GovernedSelect;
      try {
        parsed = await storage.parseGovernedSelect(text);
      } catch (err) {
        if (err instanceof SelectRefusedError) throw refused(err.message);
        throw err;
      }
      const found = await catalog.findByNames(orgId, parsed.relations);
      const byName = new Map(found.map((d) => [d.name.toLowerCase(), d]));
      const missing = parsed.relations.filter((name) => !byName.has(name.toLowerCase()));
      // Names that are no dataset are refused here when the parse is exact; otherwise they may be
      // columns or functions, and the database refuses a table that is no dataset offered to it.
      const reads = parsed.exact ? parsed.relations : parsed.relations.filter((name) => byName.has(name.toLowerCase()));
      if (parsed.exact && missing.length) throw problems.badRequest(`no dataset named ${missing.map((m) => `"${m}"`).join(', ')} in this organization`, [{ path: 'body.sql', message: `unknown dataset ${missing[0]}` }]);
      return { parsed, byName, reads };
    }

    /**
     * The statement as governed SQL reads it: checked, and each dataset it names as `principal` may
     * see it (null: the platform describing it, nothing masked or limited), PII columns outside
     * `unmasked` masked whatever the caller holds.
     */
    async function prepare(text: string, orgId: number, principal: Principal | null, unmasked?: readonly string[]) {
      const { parsed, byName, reads } = await resolve(text, orgId);
      // Each dataset as this caller may see it, by the name the query reads it by.
      const datasets: GovernedDataset[] = await Promise.all(reads.map((name) => catalog.governed(principal, byName.get(name.toLowerCase())!, name)));
      if (unmasked) {
        const clear = new Set(unmasked);
        for (const [i, name] of reads.entries()) {
          const pii = new Set(byName.get(name.toLowerCase())!.columns.filter((c) => c.pii && !clear.has(c.name)).map((c) => c.name));
          datasets[i] = { ...datasets[i], columns: datasets[i].columns.map((c) => (pii.has(c.name) ? { ...c, masked: true } : c)) };
        }
      }
      return { sql: parsed.sql, datasets, touched: [...new Set(reads.map((name) => byName.get(name.toLowerCase())!.id))] };
    }

    /** The problem a refusal of the database is answered with (others are rethrown as they are). */
    function problemOf(err: unknown): unknown {
      if (err instanceof QueryTimeoutError) return new HttpProblem(422, err.message, { title: QUERY_TIMED_OUT, errors: [{ path: 'body.timeout_ms', message: err.message }] });
      if (err instanceof QueryRejectedError) {
        const message = `the database refused the query: ${err.message}`;
        return new HttpProblem(400, message, { title: QUERY_REJECTED, errors: [{ path: 'body.sql', message }] });
      }
      if (err instanceof GovernedSqlUnavailableError) return problems.unavailable(err.message);
      return err;
    }

    async function execute(body: { sql: string; params: unknown[]; limit: number; timeout_ms: number; unmasked?: readonly string[] }, orgId: number, principal: Principal, audit: RequestAudit) {
      const { sql, datasets, touched } = await prepare(body.sql, orgId, principal, body.unmasked);
      const started = performance.now();
      const digest = crypto.createHash('sha256').update(body.sql).digest('hex');
      try {
        const result = await storage.runReadOnly({
          sql,
          params: body.params,
          orgId,
          datasets,
          mask: PII_MASK,
          limit: body.limit,
          maxBytes: config.SQL_MAX_RESULT_BYTES,
          timeoutMs: body.timeout_ms,
        });
        const elapsed = Math.round((performance.now() - started) * 100) / 100;
        const truncated = result.truncated !== null;
        await audit.record({ action: 'sql.execute', targetType: 'dataset', targetId: touched[0] ?? null, details: { query_sha256: digest, datasets: touched, row_count: result.rows.length, truncated, elapsed_ms: elapsed } });
        return { columns: result.columns, rows: result.rows, row_count: result.rows.length, truncated, truncated_reason: result.truncated, elapsed_ms: elapsed };
      } catch (err) {
        const outcome = err instanceof QueryTimeoutError ? 'timeout' : err instanceof QueryRejectedError ? 'rejected' : 'error';
        await audit.record({ action: 'sql.execute', outcome: 'failure', targetType: 'dataset', targetId: touched[0] ?? null, details: { query_sha256: digest, datasets: touched, reason: outcome } });
        throw problemOf(err);
      }
    }

    ctx.provideService(governedSql, {
      describe: async (query, orgId) => {
        const { sql, datasets } = await prepare(query.sql, orgId, null, query.unmasked);
        try {
          return await storage.describeGoverned({ sql, params: query.params ?? [], orgId, datasets, mask: PII_MASK, timeoutMs: query.timeout_ms ?? 30_000 });
        } catch (err) {
          throw problemOf(err);
        }
      },
      reads: async (query, orgId) => {
        const { byName, reads } = await resolve(query.sql, orgId);
        return [...new Set(reads.map((name) => byName.get(name.toLowerCase())!))];
      },
      run: (query, orgId, principal, audit) =>
        execute({ sql: query.sql, params: query.params ?? [], limit: query.limit ?? 1000, timeout_ms: query.timeout_ms ?? 30_000, unmasked: query.unmasked }, orgId, principal, audit),
    });

    return {
      routes: [
        defineRoute({
          method: 'post',
          path: '',
          summary: 'Run a read-only SQL query over the datasets of the current organization',
          description:
            'Datasets are tables named by their dataset name (no schema). One SELECT (WITH allowed); bound parameters $1, $2, … from `params`. PII columns read *** without datasets.pii.read. Rows come back as arrays in the order of `columns`.',
          security: 'bearer',
          orgScoped: true,
          capability: 'datasets.read',
          request: {
            body: z.object({
              sql: z.string().min(1).max(100_000),
              params: z.array(z.union([z.string(), z.number(), z.boolean(), z.null()])).max(100).default([]),
              limit: z.number().int().min(1).max(MAX_ROWS).default(1000),
              timeout_ms: z.number().int().min(1).max(MAX_TIMEOUT_MS).default(30_000),
            }),
          },
          responses: {
            422: { description: 'The query ran longer than its timeout (`timeout_ms`)' },
            200: {
              description: 'The result',
              schema: z
                .object({
                  columns: z.array(z.object({ name: z.string(), type: z.string() })),
                  rows: z.array(z.array(dataValueSchema)).describe('Each row as an array of values, in the order of `columns`'),
                  row_count: z.number().int(),
                  truncated: z.boolean().describe('More rows matched than came back (see `truncated_reason`)'),
                  truncated_reason: z
                    .enum(['row_limit', 'byte_limit'])
                    .nullable()
                    .describe('`row_limit`: more rows than `limit` matched; `byte_limit`: the rows past SQL_MAX_RESULT_BYTES were left out'),
                  elapsed_ms: z.number(),
                })
                .meta({ id: 'SqlResult' }),
            },
          },
          handler: ({ body, orgId, principal, audit }) => execute(body, orgId, principal, audit),
        }),
      ],
    };
  },
});
