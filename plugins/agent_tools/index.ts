import { definePlugin, defineRoute, kernelServices, z } from '../../kernel/plugin-api.ts';
import { agentToolRunner, agentTools } from './public.ts';
import { Tools } from './tools.ts';

const functionTool = z
  .object({ type: z.literal('function'), function: z.object({ name: z.string(), description: z.string(), parameters: z.record(z.string(), z.unknown()) }) })
  .meta({ id: 'AgentFunctionTool', description: 'A tool in the function-calling format (OpenAI tools, Anthropic input_schema alike)' });

/**
 * The `agent_tools` router: the tools agents may call (contributed to `agent_tools.tools`), each run
 * with the calling user's rights, its arguments checked against its JSON Schema, every call audited.
 */
export default definePlugin({
  deps: { enablement: kernelServices.pluginEnablement },
  init: ({ enablement }, ctx) => {
    const tools = new Tools(ctx.pluginId, enablement);
    ctx.provideExtensionPoint(agentTools, (contribution) => tools.accept(contribution), { list: (orgId) => tools.described(orgId) });
    ctx.provideService(agentToolRunner, tools);
    const base = { security: 'bearer', orgScoped: true, capability: 'agent_tools.use' } as const;
    return {
      routes: [
        defineRoute({
          ...base,
          method: 'get',
          path: '',
          summary: 'Agent tools',
          description: 'The tools offered in this organization that the caller may call, with their argument schemas, in the function-calling format a model is given.',
          responses: { 200: { description: 'The tools', schema: z.object({ items: z.array(functionTool) }) } },
          handler: async ({ orgId, principal }) => ({ items: await tools.list({ orgId, principal }) }),
        }),
        defineRoute({
          ...base,
          method: 'post',
          path: '/{name}/invoke',
          summary: 'Invoke an agent tool',
          description: 'Runs the tool with the caller\u2019s rights (row policies, PII masking, connector access): `{result}` is what a model would be given. Arguments that fail the tool\u2019s schema are a 400 naming each field (`body.arguments.<field>`); the call is audited (which arguments were given, never their values).',
          request: {
            params: z.object({ name: z.string().max(64) }),
            body: z.object({ arguments: z.record(z.string(), z.unknown()).default({}) }).strict(),
          },
          responses: {
            200: { description: 'What the tool answered', schema: z.object({ result: z.unknown() }) },
            400: { description: 'An argument that does not fit the tool\u2019s schema (each named)' },
            403: { description: 'The caller lacks the capability the tool needs' },
            404: { description: 'No such tool offered here' },
            422: { description: 'The tool cannot run here (e.g. no connector of the kind it sends through)' },
            429: { description: 'A rate limit or quota the tool spends from' },
            502: { description: 'The peer the tool calls failed or answered an error' },
            504: { description: 'A query the tool runs (an API Service\u2019s sql endpoint) ran past its time' },
          },
          handler: async ({ params, body, orgId, principal, audit, requestId }) => ({ result: await tools.invoke(params.name, body.arguments, { orgId, principal, audit, requestId }) }),
        }),
      ],
    };
  },
});
