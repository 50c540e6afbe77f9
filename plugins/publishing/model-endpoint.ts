import { problems } from '../../kernel/plugin-api.ts';
import type { RegistryModels } from '../registry/public.ts';
import { inputOf, refuseInputs, refuseUnfixable, type CallInput, type EndpointContext } from './call-input.ts';
import type { ModelEndpoint } from './endpoints.ts';

const ROWS_INPUT: ReadonlySet<string> = new Set(['rows']);
const NO_FIXED_INPUTS: ReadonlySet<string> = new Set();

const isRowObject = (row: unknown): row is Record<string, unknown> => typeof row === 'object' && row !== null && !Array.isArray(row);

/**
 * Runs a `model` endpoint: `POST {rows: [..]}` scored by its pinned version (or the model's active
 * one) through the registry's service, as its publisher, who must still hold `registry.read`. A row
 * missing a feature or with a value of the wrong type is a 400 naming `body.rows.<i>.<feature>`.
 */
export async function runModelEndpoint(endpoint: ModelEndpoint, input: CallInput, context: EndpointContext, models: RegistryModels) {
  refuseUnfixable(context.fixed, NO_FIXED_INPUTS);
  if (input.source !== 'body') throw problems.badRequest('a model endpoint is called with POST {"rows": [{feature: value, …}]}', [{ path: 'body.rows', message: 'required' }]);
  refuseInputs(input.values, 'body', ROWS_INPUT, context.fixed);
  const rows = inputOf(input.values, 'rows');
  if (!Array.isArray(rows) || rows.length === 0 || !rows.every(isRowObject)) {
    throw problems.badRequest('body.rows: one or more rows, each an object of feature values', [{ path: 'body.rows', message: 'must be a non-empty array of objects' }]);
  }
  if (!context.publisher.capabilities.has('registry.read')) {
    throw problems.forbidden('this API Service reads with the rights of the user who published it, and that user no longer holds the capability "registry.read"');
  }
  return models.predict(context.orgId, endpoint.config.model_id, endpoint.config.version ?? null, rows);
}
