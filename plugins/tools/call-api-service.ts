import { definePlugin } from '../../kernel/plugin-api.ts';
import { agentTool, agentTools } from '../agent_tools/public.ts';
import { apiServiceCalls } from '../publishing/public.ts';

interface Args {
  service: string;
  endpoint: string;
  input?: Record<string, unknown>;
}

/**
 * `call_api_service`: an endpoint of one of the organization's published API Services, called with
 * the user's rights; its input checked against the service's own OpenAPI description first.
 */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const calls = ctx.useService(apiServiceCalls);
    ctx.contribute(
      agentTools,
      agentTool<Args>({
        name: 'call_api_service',
        description:
          'Call an endpoint of a published API Service of the organization with the user\u2019s rights: `service` is its key, `endpoint` one of its endpoints, `input` the JSON body the endpoint takes (a sql endpoint its parameters, a lookup endpoint one key or {keys: [...]}, a model endpoint {rows: [...]}). An input that does not fit is answered with what the endpoint expects.',
        capability: 'datasets.read',
        parameters: {
          type: 'object',
          properties: {
            service: { type: 'string', minLength: 1, maxLength: 63, description: 'The API Service\u2019s key (its URL segment)' },
            endpoint: { type: 'string', minLength: 1, maxLength: 63 },
            input: { type: 'object', default: {}, description: 'The endpoint\u2019s input, as a POST on /api/service/{key}/{endpoint} takes it' },
          },
          required: ['service', 'endpoint'],
          additionalProperties: false,
        },
        run: (args, { orgId, principal, audit, argumentsAt }) =>
          calls.callAsUser({ orgId, principal, audit, serviceKey: args.service, endpoint: args.endpoint, input: args.input ?? {}, location: `${argumentsAt}.input` }),
      }),
    );
  },
});
