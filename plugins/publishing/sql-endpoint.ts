import { HttpProblem, isHttpProblem, problems, withFieldsRenamed } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog } from '../datasets/public.ts';
import { QUERY_REJECTED, QUERY_TIMED_OUT, type GovernedSql } from '../sql/public.ts';
import type { SqlEndpoint } from './endpoints.ts';
import { inputOf, refuseInputs, refuseUnfixable, type CallInput, type EndpointContext } from './call-input.ts';
import { typedInput } from './inputs.ts';

/**
 * A refusal of governed SQL as the caller of an endpoint meets it: they sent no `sql` nor
 * `timeout_ms`. What the database refused while running (a division by zero) it refused for these
 * inputs, so the refusal names them; a query past its time (running, or waiting for one of the
 * organization's query slots) is the server's 504, not the caller's 422. Anything else (the query
 * names a dataset deleted since) is answered as governed SQL words it.
 */
function asCallRefusal(err: unknown, input: CallInput): unknown {
  if (!isHttpProblem(err)) return err;
  if (err.title === QUERY_TIMED_OUT) return new HttpProblem(504, err.detail, { title: err.title });
  if (err.title === QUERY_REJECTED) return withFieldsRenamed(err, (path) => (path === 'body.sql' ? input.source : path));
  return err;
}

/**
 * Runs a `sql` endpoint: its statement through governed SQL (the path of POST /api/sql: the
 * organization's datasets only, read-only, bounded, audited) with the publisher's rights, each
 * `$n` bound to the n-th declared parameter: the key's fixed value, else the caller's (typed), else
 * the default. Rows come back as objects.
 */
export async function runSqlEndpoint(endpoint: SqlEndpoint, input: CallInput, context: EndpointContext, deps: { sql: GovernedSql; catalog: DatasetCatalog; sqlTimeoutMs: number }) {
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
    .run({ sql: config.query, params, limit: config.max_rows, timeout_ms: deps.sqlTimeoutMs, unmasked: config.unmasked_columns }, context.orgId, context.publisher, context.audit)
    .catch((err: unknown) => Promise.reject(asCallRefusal(err, input)));
  const names = result.columns.map((c) => c.name);
  return {
    columns: result.columns,
    rows: result.rows.map((row) => Object.fromEntries(names.map((name, i) => [name, row[i]]))),
    row_count: result.row_count,
    truncated: result.truncated,
  };
}
