import { definePlugin, defineRoute, z } from '../../kernel/plugin-api.ts';
import { apiServiceCalls } from '../publishing/public.ts';

const params = z.object({
  key: z.string().max(63).describe('The API Service'),
  endpoint: z.string().max(63).describe('One of its endpoints'),
});
const answer = z.record(z.string(), z.unknown()).meta({ id: 'ApiServiceAnswer', description: 'sql: {columns, rows, row_count, truncated}; lookup: {key, rows} or, for a batch, {results: [{key, rows}]}' });
const responses = {
  200: { description: 'The endpoint\u2019s answer', schema: answer },
  400: { description: 'An input that does not fit, naming the field' },
  403: { description: 'A key of another service, an endpoint outside the key\u2019s allowed_endpoints, or a publisher who may not read any more' },
  404: { description: 'No published service or endpoint of that name' },
  409: { description: 'A lookup with on_multiple `error` found several rows for a key' },
  429: { description: 'Over the key\u2019s rate (Retry-After)' },
  501: { description: 'A function endpoint (declared, not callable yet)' },
  504: { description: 'A sql endpoint\u2019s query ran longer than API_SERVICE_SQL_TIMEOUT_MS' },
};

/** The service path (spec §4): GET|POST /api/service/{key}/{endpoint} with a data API key (X-API-Key), never a bearer token. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const calls = ctx.useService(apiServiceCalls);
    return {
      routes: [
        // Matched before /{key}/{endpoint} (the kernel registers static segments first); no endpoint
        // can be named openapi.json anyway (endpoint names hold no dot).
        defineRoute({
          method: 'get',
          path: '/{key}/openapi.json',
          summary: 'The OpenAPI 3.1 description of an API Service',
          description:
            'The published endpoints this data API key may call (its allowed_endpoints), without the inputs it fixes (fixed_params), their inputs and answers typed from their config: for generating clients. Refused as a call is: a key of another service 403, a service not published 404.',
          security: 'apiKey',
          request: { params: params.pick({ key: true }) },
          responses: {
            200: { description: 'An OpenAPI 3.1 document', schema: z.record(z.string(), z.unknown()).meta({ id: 'ApiServiceOpenApiDocument', description: 'An OpenAPI 3.1 document' }) },
            403: { description: 'A key of another service, or a publisher who may not read any more' },
            404: { description: 'No published service of that key' },
          },
          handler: ({ params, principal }) => calls.openapi(params.key, principal),
        }),
        defineRoute({
          method: 'get',
          path: '/{key}/{endpoint}',
          summary: 'Call an API Service endpoint with inputs in the query string',
          description: 'A sql endpoint takes its parameters, a lookup endpoint one key (a value per key column).',
          security: 'apiKey',
          request: { params, query: z.object({}).catchall(z.union([z.string(), z.array(z.string())])) },
          responses,
          handler: ({ params, query, principal, audit }) => calls.call({ serviceKey: params.key, endpoint: params.endpoint, principal, audit, input: { source: 'query', values: query } }),
        }),
        defineRoute({
          method: 'post',
          path: '/{key}/{endpoint}',
          summary: 'Call an API Service endpoint with inputs in a JSON body',
          description: 'A sql endpoint takes its parameters, a lookup endpoint one key or a batch `{keys: [{…}, …]}` (answered in input order).',
          security: 'apiKey',
          request: { params, body: z.record(z.string(), z.unknown()) },
          responses,
          handler: ({ params, body, principal, audit }) => calls.call({ serviceKey: params.key, endpoint: params.endpoint, principal, audit, input: { source: 'body', values: body } }),
        }),
      ],
    };
  },
});
