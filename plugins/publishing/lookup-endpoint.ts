import { problems } from '../../kernel/plugin-api.ts';
import { PII_MASK, type DatasetCatalog, type DatasetInfo, type RowsQuery } from '../datasets/public.ts';
import type { LookupEndpoint } from './endpoints.ts';
import { typedInput, type InputType } from './inputs.ts';
import { readBatchAtOnce, severalRows } from './lookup-batch.ts';
import { inputOf, refuseInputs, refuseUnfixable, type CallInput, type EndpointContext } from './call-input.ts';

/** Keys one batch call may look up. */
export const MAX_BATCH_KEYS = 100;

type Row = Record<string, unknown>;

/** A condition matching one typed value of a column, by name (never parsed from text: a name may hold `:`). */
const equals = (column: string, value: unknown): OneOf => ({ column, values: [value] });

type OneOf = NonNullable<RowsQuery['oneOf']>[number];

/**
 * Runs a `lookup` endpoint: one key from the inputs, or a batch (`{keys: [{…}, …]}` in a JSON body)
 * answered in input order (by one read where it can: see `readBatchAtOnce`, else one per key).
 * Each key reads through the path of GET /api/datasets/{id}/rows with the
 * publisher's rights (row policies, PII), its columns' values bound; 0..n rows per key as
 * `on_multiple` says. A key column the API key fixes takes the fixed value, and fixed columns that
 * are no key columns filter every key's rows.
 */
export async function runLookupEndpoint(endpoint: LookupEndpoint, dataset: DatasetInfo, input: CallInput, context: EndpointContext, catalog: DatasetCatalog) {
  const { config } = endpoint;
  const columns = new Map(dataset.columns.map((c) => [c.name, c]));
  const types = new Map(dataset.columns.map((c) => [c.name, c.type as InputType]));
  refuseUnfixable(context.fixed, new Set(types.keys()));
  const fixedConditions = Object.entries(context.fixed).map(([column, value]) => equals(column, typedInput(types.get(column)!, value, 'body', `fixed_params.${column}`, catalog.parseValue)));
  const callerKeys = config.keys.filter((column) => !Object.hasOwn(context.fixed, column));
  const unmasked = new Set(config.unmasked_columns);
  const masked = dataset.columns.filter((c) => c.pii && !unmasked.has(c.name)).map((c) => c.name);
  const limit = config.on_multiple === 'first' ? 1 : config.on_multiple === 'error' ? 2 : config.max_rows_per_key;

  /** The key's value of each caller key column, typed against its column (a 400 naming `at.<column>`). */
  const keyOf = (values: Record<string, unknown>, at: string): unknown[] => {
    refuseInputs(values, at, new Set(callerKeys), context.fixed);
    return callerKeys.map((column) => {
      const path = `${at}.${column}`;
      const value = inputOf(values, column);
      if (value === undefined) throw problems.badRequest(`${path}: required (a key is ${callerKeys.join(', ')})`, [{ path, message: 'required' }]);
      return typedInput(types.get(column)!, value, input.source, path, catalog.parseValue);
    });
  };
  const read = (query: RowsQuery) => catalog.rows(context.publisher, context.orgId, dataset.id, query);
  // PII the endpoint does not list reads masked, whatever the publisher may see.
  const mask = (rows: Row[]) => {
    for (const row of rows) for (const column of masked) if (row[column] !== undefined && row[column] !== null) row[column] = PII_MASK;
    return rows;
  };

  const rowsOf = async (key: unknown[], at: string): Promise<Row[]> => {
    const conditions = key.map((value, i) => equals(callerKeys[i], value));
    const page = await read({ limit, filter: config.filters, oneOf: [...fixedConditions, ...conditions], columns: config.columns?.join(',') });
    if (config.on_multiple === 'error' && page.rows.length > 1) throw severalRows(at);
    return mask(page.rows);
  };

  const batch = input.source === 'body' ? inputOf(input.values, 'keys') : undefined;
  if (batch === undefined) return { key: input.values, rows: await rowsOf(keyOf(input.values, input.source), input.source) };
  if (Object.keys(input.values).length > 1) throw problems.badRequest('body: a batch holds `keys` only', [{ path: 'body', message: 'a batch holds keys only' }]);
  if (!Array.isArray(batch) || batch.length === 0 || batch.length > MAX_BATCH_KEYS) {
    throw problems.badRequest(`body.keys: must be a list of 1 to ${MAX_BATCH_KEYS} keys`, [{ path: 'body.keys', message: `1 to ${MAX_BATCH_KEYS} keys` }]);
  }
  const keys = batch.map((key, i) => {
    const at = `body.keys.${i}`;
    if (typeof key !== 'object' || key === null || Array.isArray(key)) throw problems.badRequest(`${at}: must be an object of key columns`, [{ path: at, message: 'must be an object' }]);
    return keyOf(key as Record<string, unknown>, at);
  });
  const atOnce =
    callerKeys.length === 1 && keys.length > 1
      ? await readBatchAtOnce({ column: columns.get(callerKeys[0])!, values: keys.map((key) => key[0]), perKey: limit, onMultiple: config.on_multiple, filters: config.filters, fixed: fixedConditions, columns: config.columns, read })
      : null;
  const rows = atOnce ? atOnce.map(mask) : await Promise.all(keys.map((key, i) => rowsOf(key, `body.keys.${i}`)));
  return { results: batch.map((key, i) => ({ key, rows: rows[i] })) };
}
