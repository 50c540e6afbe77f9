import { HttpProblem, defineRoute, identitySchemas as s, problems, z, type RouteDefinition } from '../../kernel/plugin-api.ts';
import type { EndpointRunner } from './calls.ts';
import { ENDPOINT_KINDS } from './endpoints.ts';
import type { ServiceStore } from './service-store.ts';

/** A caller's input name: as long as a column name may be, so a refusal naming it stays short. */
const inputName = z.string().min(1).max(200);

const dryRunInput = z
  .object({
    query: z.record(inputName, z.union([z.string(), z.array(z.string())])).optional().describe('The inputs as a GET on the service path carries them: text, as in a query string'),
    body: z.record(inputName, z.unknown()).optional().describe('The inputs as a POST on the service path carries them: a JSON object (a batch of lookup keys, model rows…)'),
  })
  .strict()
  .refine((input) => (input.query === undefined) !== (input.body === undefined), 'give exactly one of `query` (inputs as a GET carries them) and `body` (as a POST does)');

const dryRunAnswer = z
  .object({
    result: z.record(z.string(), z.unknown()).describe('What the service path would answer the same inputs'),
    timing_ms: z.number().describe('How long the endpoint took to run, in milliseconds'),
    endpoint: z.string(),
    kind: z.enum(ENDPOINT_KINDS),
  })
  .meta({ id: 'ApiServiceDryRun' });

/**
 * POST /api-services/{id}/endpoints/{name}/test: runs one endpoint of a service of any status (a
 * dry run comes before publishing and before any key) with the caller's rights, no fixed
 * parameters, through the runner calls go through.
 */
export function dryRunRoutes({ services, run }: { services: ServiceStore; run: EndpointRunner }): RouteDefinition<any>[] {
  return [
    defineRoute({
      security: 'bearer',
      orgScoped: true,
      method: 'post',
      path: '/api-services/{id}/endpoints/{name}/test',
      summary: 'Dry-run an API Service endpoint',
      description:
        'Runs the endpoint of a draft, published or unpublished service with your rights (your row policies; PII masked unless the endpoint lists the column in `unmasked_columns` and you hold `datasets.pii.read`), without a data API key and so without fixed parameters. Send the inputs as a call would: `query` (text, as a GET) or `body` (JSON, as a POST), exactly one. Refusals are the call\u2019s (400 naming the input, 409, 501 for a function). Audited as `publishing.endpoint.test`.',
      capability: 'publishing.write',
      request: { params: z.object({ id: s.pathId, name: z.string().max(63).describe('The endpoint') }), body: dryRunInput },
      responses: {
        200: { description: 'The endpoint\u2019s answer and how long it took', schema: dryRunAnswer },
        403: { description: 'The caller lacks `datasets.read`' },
        404: { description: 'No such service, or no endpoint of that name' },
        409: { description: 'A lookup with on_multiple `error` found several rows for a key, or a model without a ready version' },
        501: { description: 'A function endpoint (declared, not callable yet)' },
        504: { description: 'A sql endpoint\u2019s query ran longer than API_SERVICE_SQL_TIMEOUT_MS' },
      },
      handler: async ({ params, body, orgId, principal, audit }) => {
        // It reads datasets as the caller, as the service will read them as its publisher.
        if (!principal.capabilities.has('datasets.read')) throw problems.forbidden('a dry run reads datasets with your rights: this needs the capability "datasets.read"');
        const service = await services.get(orgId, params.id);
        const endpoint = service.endpoints.find((e) => e.name === params.name);
        if (!endpoint) throw problems.notFound(`API Service "${service.key}" has no endpoint "${params.name}"`);
        const input = body.query !== undefined ? { source: 'query' as const, values: body.query } : { source: 'body' as const, values: body.body! };
        const target = { targetType: 'api_service', targetId: service.id };
        const started = performance.now();
        try {
          const result = await run(endpoint, input, { orgId, publisher: principal, fixed: {}, audit });
          const timing = Math.round((performance.now() - started) * 100) / 100;
          await audit.record({ action: 'publishing.endpoint.test', ...target, details: { endpoint: endpoint.name, kind: endpoint.kind, timing_ms: timing } });
          return { result, timing_ms: timing, endpoint: endpoint.name, kind: endpoint.kind };
        } catch (err) {
          const status = err instanceof HttpProblem ? err.status : 500;
          await audit.record({ action: 'publishing.endpoint.test', outcome: 'failure', ...target, details: { endpoint: endpoint.name, kind: endpoint.kind, status } });
          throw err;
        }
      },
    }),
  ];
}
