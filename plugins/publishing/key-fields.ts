import { identitySchemas as s, problems, z } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog } from '../datasets/public.ts';
import { lookupDataset } from './endpoints.ts';
import { MAX_INPUT_TEXT, notReservedName, RESERVED_NAME_MESSAGE, typedInput, type InputType } from './inputs.ts';
import type { KeyFields } from './key-store.ts';
import type { ApiService } from './service-store.ts';

export const keyInput = z.object({
  name: s.displayName,
  allowed_endpoints: z.array(z.string().min(1).max(63)).min(1).max(50).nullable().default(null).describe('Endpoint names the key may call; null: all'),
  expires_at: z.iso.datetime({ offset: true }).nullable().default(null).describe('When the key stops working; null: never'),
  fixed_params: z
    .record(
      z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,199}$/, 'must be a parameter or column name').refine(notReservedName, RESERVED_NAME_MESSAGE),
      z.union([z.string().max(MAX_INPUT_TEXT), z.number(), z.boolean(), z.null()]),
    )
    .default({})
    .describe('Inputs locked for every call of the key: a SQL parameter, or a lookup column (its rows filtered on it)'),
  rate_limit_per_min: z.number().int().min(1).max(1_000_000).nullable().default(null).describe("Calls a minute the key may make; null: only the platform's API_KEY_RATE_LIMIT_PER_MIN"),
})
  // A misspelt `allowed_endpoints` or `fixed_params` left out would mint a key reaching more than meant: a 400 naming it.
  .strict();

/** Why an endpoint cannot take the fixed parameter `param`: model and function endpoints take none. */
function unfixable(endpoint: string, kind: ApiService['endpoints'][number]['kind'], param: string): string {
  if (kind === 'sql' || kind === 'lookup') return `the endpoint "${endpoint}" has no ${kind === 'sql' ? 'parameter' : 'column'} "${param}"`;
  return `the endpoint "${endpoint}" is a ${kind} endpoint, which takes no fixed parameter`;
}

const refuse = (path: string, message: string) => problems.badRequest(`${path}: ${message}`, [{ path, message }]);

/**
 * The key's fields checked against its service: known endpoint names, an expiry in the future, and
 * each fixed parameter typed and applying to every endpoint the key may call (a key scoped to a
 * region must not reach an endpoint that ignores the region). Answers them with the expiry as
 * UTC ISO-8601.
 */
export async function checkKeyFields(body: z.output<typeof keyInput>, service: ApiService, orgId: number, catalog: DatasetCatalog): Promise<KeyFields> {
  const names = new Set(service.endpoints.map((e) => e.name));
  body.allowed_endpoints?.forEach((name, i) => {
    if (!names.has(name)) throw refuse(`body.allowed_endpoints.${i}`, `API Service "${service.key}" has no endpoint "${name}"`);
  });
  // Read as a timestamp column reads it: UTC, and refused when an offset carries it out of the years 1 to 9999.
  const expiresAt = body.expires_at === null ? null : (typedInput('timestamp', body.expires_at, 'body', 'body.expires_at', catalog.parseValue) as string);
  if (expiresAt !== null && Date.parse(expiresAt) <= Date.now()) throw refuse('body.expires_at', 'must be in the future');

  const callable = service.endpoints.filter((e) => body.allowed_endpoints === null || body.allowed_endpoints.includes(e.name));
  for (const [param, value] of Object.entries(body.fixed_params)) {
    const path = `body.fixed_params.${param}`;
    for (const endpoint of callable) {
      let type: InputType | undefined;
      if (endpoint.kind === 'sql') type = endpoint.config.params.find((p) => p.name === param)?.type;
      else if (endpoint.kind === 'lookup') {
        const column = (await lookupDataset(catalog, orgId, endpoint, `endpoints.${endpoint.name}`)).columns.find((c) => c.name === param);
        if (column?.type === 'json') throw refuse(path, `column "${param}" holds JSON: a fixed parameter is one value`);
        type = column?.type as InputType | undefined;
      }
      if (!type) throw refuse(path, `${unfixable(endpoint.name, endpoint.kind, param)}: a fixed parameter must apply to every endpoint the key may call`);
      typedInput(type, value, 'body', path, catalog.parseValue);
    }
  }
  return { name: body.name, allowed_endpoints: body.allowed_endpoints, fixed_params: body.fixed_params, rate_limit_per_min: body.rate_limit_per_min, expires_at: expiresAt };
}
