import { definePlugin } from '../../kernel/plugin-api.ts';
import { connectorActions } from '../connectors/public.ts';
import { stepType, stepTypes } from '../pipeline/public.ts';

/**
 * The step type `send_message`: a connector's `send_message` action (workflow_webhook,
 * messaging_provider) with the message and, as metadata, what it is about: the scenario run and
 * step, or, sent by a scenario's reporter, the report {run_id, scenario, status, failed_step, drift}.
 */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const actions = ctx.useService(connectorActions);
    ctx.contribute(
      stepTypes,
      stepType<{ connector_id: number; message: string }>({
        id: 'send_message',
        description: "Sends a message through a connector's send_message action (workflow_webhook, messaging_provider)",
        params: {
          type: 'object',
          properties: { connector_id: { type: 'integer', minimum: 1 }, message: { type: 'string', minLength: 1, maxLength: 10_000 } },
          required: ['connector_id', 'message'],
          additionalProperties: false,
        },
        async run(context) {
          const metadata = context.report ?? { run_id: context.run.id, scenario: context.run.scenario, step: context.step.name };
          const answer = await actions.run(context.orgId, context.params.connector_id, 'send_message', { message: context.params.message, metadata }, context.principal, context.audit, 'params');
          return { status: 'succeeded', output: { status: answer.status ?? null } };
        },
      }),
    );
  },
});
