import { defineRoute, identitySchemas as s, z, type RouteDefinition } from '../../kernel/plugin-api.ts';
import { quantileMs } from './latency-histogram.ts';
import type { ServiceStore } from './service-store.ts';
import type { UsageLine, UsageStore } from './usage-store.ts';

const MINUTE_MS = 60_000;
const DEFAULT_WINDOW_MS = 24 * 60 * MINUTE_MS;

const instant = z.iso.datetime({ offset: true }).max(40);

const usageItem = z.object({
  key_id: z.number().int(),
  key_name: z.string(),
  endpoint: z.string().nullable().describe('null: calls naming an endpoint the service does not have (answered 403 or 404)'),
  calls: z.number().int(),
  errors: z.number().int().describe('Calls answered with a status of 400 or more'),
  p50_ms: z.number().describe('Median latency, from the call to its answer, to the precision of its histogram bucket (±12%)'),
  p99_ms: z.number(),
  last_call_at: z.string(),
});

const usageSchema = z
  .object({
    since: z.string().describe('The start of the first minute counted'),
    until: z.string(),
    items: z.array(usageItem),
    totals: z.object({ calls: z.number().int(), errors: z.number().int() }),
  })
  .meta({ id: 'ApiServiceUsage' });

const itemOf = (line: UsageLine) => ({
  key_id: line.keyId,
  key_name: line.keyName,
  endpoint: line.endpoint,
  calls: line.calls,
  errors: line.errors,
  p50_ms: quantileMs(line.histogram, 0.5)!,
  p99_ms: quantileMs(line.histogram, 0.99)!,
  last_call_at: new Date(line.lastCallAt).toISOString(),
});

/** GET /api-services/{id}/usage: the calls of a service's keys, per key and endpoint, over a window of minutes. */
export function usageRoutes({ services, usage }: { services: ServiceStore; usage: UsageStore }): RouteDefinition<any>[] {
  return [
    defineRoute({
      security: 'bearer',
      orgScoped: true,
      method: 'get',
      path: '/api-services/{id}/usage',
      summary: 'Usage of an API Service',
      description:
        'Per data API key and endpoint: calls, errors (answers of 400 or more), median and 99th percentile latency, last call, counted by the minute: the minutes starting in [since rounded down to its minute, until). Each instance writes its counts every few seconds (API_USAGE_FLUSH_MS), so the latest seconds may not show yet.',
      capability: 'publishing.read',
      request: {
        params: s.idParam('id'),
        query: z.object({
          since: instant.optional().describe('ISO-8601 instant; default 24 hours before until'),
          until: instant.optional().describe('ISO-8601 instant; default now'),
        }),
      },
      responses: { 200: { description: 'Usage per key and endpoint', schema: usageSchema } },
      handler: async ({ params, query, orgId }) => {
        const service = await services.get(orgId, params.id);
        const until = query.until ? Date.parse(query.until) : Date.now();
        const given = query.since ? Date.parse(query.since) : until - DEFAULT_WINDOW_MS;
        const since = given - (((given % MINUTE_MS) + MINUTE_MS) % MINUTE_MS);
        const items = (await usage.read(service.id, since, until)).map(itemOf);
        const totals = items.reduce((sum, item) => ({ calls: sum.calls + item.calls, errors: sum.errors + item.errors }), { calls: 0, errors: 0 });
        return { since: new Date(since).toISOString(), until: new Date(until).toISOString(), items, totals };
      },
    }),
  ];
}
