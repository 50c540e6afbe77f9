import { problems, withFieldsRenamed } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog } from '../datasets/public.ts';
import type { GovernedSql } from '../sql/public.ts';
import type { SqlEndpoint } from './endpoints.ts';
import { inputOf, refuseInputs, refuseUnfixable, type CallInput, type EndpointContext } from './call-input.ts';
import { typedInput } from './inputs.ts';

/**
 * Runs a `sql` endpoint: its statement through governed SQL (the path of POST /api/sql: the
 * organization's datasets only, read-only, bounded, audited) with the publisher's rights, each
 * `$n` bound to the n-th declared parameter: the key's fixed value, else the caller's (typed), else
 * the default. Rows come back as objects.
 */
export async function runSqlEndpoint(endpoint: SqlEndpoint, input: CallInput, context: EndpointContext, deps: { sql: GovernedSql; catalog: DatasetCatalog }) {
  const { config } = endpoint;
  const declared = new Set(config.params.map((p) => p.name));
  refuseUnfixable(context.fixed, declared);
  refuseInputs(input.values, input.source, declared, context.fixed);
  const params = config.params.map((param) => {
    if (Object.hasOwn(context.fixed, param.name)) return typedInput(param.type, context.fixed[param.name], 'body', `fixed_params.${param.name}`, deps.catalog.parseValue);
    const path = `${input.source}.${param.name}`;
    const given = inputOf(input.values, param.name);
    if (given !== undefined) return typedInput(param.type, given, input.source, path, deps.catalog.parseValue);
    if (param.default !== undefined) return typedInput(param.type, param.default, 'body', path, deps.catalog.parseValue);
    if (param.required) throw problems.badRequest(`${path}: required`, [{ path, message: 'required' }]);
    return null;
  });
  const result = await deps.sql
    .run({ sql: config.query, params, limit: config.max_rows, unmasked: config.unmasked_columns }, context.orgId, context.publisher, context.audit)
    // The caller sent no `sql`: what the database refused at run time (a negative LIMIT, a division
    // by zero) it refused for these inputs, so the refusal names them.
    .catch((err: unknown) => Promise.reject(withFieldsRenamed(err, (path) => (path === 'body.sql' ? input.source : path))));
  const names = result.columns.map((c) => c.name);
  return {
    columns: result.columns,
    rows: result.rows.map((row) => Object.fromEntries(names.map((name, i) => [name, row[i]]))),
    row_count: result.row_count,
    truncated: result.truncated,
  };
}
