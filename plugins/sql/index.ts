import crypto from 'node:crypto';
import { z } from 'zod';
import { definePlugin, defineRoute, HttpProblem, kernelServices, problems, type Principal, type RequestAudit } from '../../kernel/plugin-api.ts';
import { QueryRejectedError, QueryTimeoutError, quoteIdentifier, type Storage } from '../../storage/index.ts';
import { datasetCatalog, PII_MASK, type DatasetCatalog, type DatasetInfo } from '../datasets/public.ts';
import { guard } from './guard.ts';
import { governedSql } from './public.ts';

export const MAX_ROWS = 10_000;
export const MAX_TIMEOUT_MS = 300_000;

/**
 * One CTE per dataset the query reads, named as the query names it: the dataset's table limited to
 * the caller's row-policy scope, PII columns masked for callers without `datasets.pii.read` and the
 * hidden row id left out. The query itself is left as written.
 */
async function datasetCte(storage: Storage, catalog: DatasetCatalog, referenced: string, dataset: DatasetInfo, principal: Principal): Promise<string> {
  const table = catalog.table(dataset).compile(storage.db).sql;
  const seePii = catalog.seesPii(principal);
  const columns = dataset.columns.map((c) => (c.pii && !seePii ? `cast('${PII_MASK}' as text) as ${quoteIdentifier(c.name)}` : quoteIdentifier(c.name)));
  const { condition } = await catalog.scope(principal, dataset);
  // The row-policy condition is written in as literals: the query's own $1, $2… keep their numbers.
  const where = [columns.length ? null : '1 = 0', condition ? storage.dataTables.inline(condition, storage.db) : null].filter(Boolean);
  return `${referenced} as (select ${columns.length ? columns.join(', ') : 'null as no_columns'} from ${table}${where.length ? ` where ${where.join(' and ')}` : ''})`;
}

/** The `sql` router: governed, read-only SQL over the current organization's datasets. */
export default definePlugin({
  deps: { storage: kernelServices.storage },
  init: ({ storage }, ctx) => {
    const catalog = ctx.useService(datasetCatalog);

    async function execute(body: { sql: string; params: unknown[]; limit: number; timeout_ms: number }, orgId: number, principal: Principal, audit: RequestAudit) {
      const guarded = guard(body.sql, storage.sqlDialect);
      const found = await catalog.findByNames(orgId, guarded.datasets);
      const byName = new Map(found.map((d) => [d.name.toLowerCase(), d]));
      const missing = guarded.datasets.filter((name) => !byName.has(name.toLowerCase()));
      if (missing.length) throw problems.badRequest(`no dataset named ${missing.map((m) => `"${m}"`).join(', ')} in this organization`, [{ path: 'body.sql', message: `unknown dataset ${missing[0]}` }]);
      const ctes = await Promise.all(guarded.datasets.map((name) => datasetCte(storage, catalog, name, byName.get(name.toLowerCase())!, principal)));
      const statement = !ctes.length
        ? guarded.sql
        : guarded.withClause
          ? guarded.sql.replace(/^with\s+(recursive\s+)?/i, `with ${guarded.withClause.recursive ? 'recursive ' : ''}${ctes.join(', ')}, `)
          : `with ${ctes.join(', ')} ${guarded.sql}`;

      const started = performance.now();
      const digest = crypto.createHash('sha256').update(body.sql).digest('hex');
      const touched = guarded.datasets.map((name) => byName.get(name.toLowerCase())!.id);
      try {
        const result = await storage.runReadOnly({ sql: statement, params: body.params, limit: body.limit, timeoutMs: body.timeout_ms });
        const elapsed = Math.round((performance.now() - started) * 100) / 100;
        await audit.record({ action: 'sql.execute', targetType: 'dataset', targetId: touched[0] ?? null, details: { query_sha256: digest, datasets: touched, row_count: result.rows.length, truncated: result.truncated, elapsed_ms: elapsed } });
        return { columns: result.columns, rows: result.rows, row_count: result.rows.length, truncated: result.truncated, elapsed_ms: elapsed };
      } catch (err) {
        const outcome = err instanceof QueryTimeoutError ? 'timeout' : 'rejected';
        await audit.record({ action: 'sql.execute', outcome: 'failure', targetType: 'dataset', targetId: touched[0] ?? null, details: { query_sha256: digest, datasets: touched, reason: outcome } });
        if (err instanceof QueryTimeoutError) throw new HttpProblem(422, err.message, { title: 'Query timed out', errors: [{ path: 'body.timeout_ms', message: err.message }] });
        if (err instanceof QueryRejectedError) throw problems.badRequest(`the database refused the query: ${err.message}`, [{ path: 'body.sql', message: err.message }]);
        throw err;
      }
    }

    ctx.provideService(governedSql, {
      run: (query, orgId, principal, audit) =>
        execute({ sql: query.sql, params: query.params ?? [], limit: query.limit ?? 1000, timeout_ms: query.timeout_ms ?? 30_000 }, orgId, principal, audit),
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
            200: {
              description: 'The result',
              schema: z
                .object({
                  columns: z.array(z.object({ name: z.string(), type: z.string() })),
                  rows: z.array(z.array(z.unknown())),
                  row_count: z.number().int(),
                  truncated: z.boolean().describe('More rows than `limit` matched'),
                  elapsed_ms: z.number(),
                })
                .meta({ id: 'SqlResult' }),
            },
          },
          handler: ({ body, orgId, principal, audit }) => execute(body, orgId!, principal!, audit),
        }),
      ],
    };
  },
});
