import { definePlugin, HttpProblem, problems, type Principal, type RequestAudit } from '../../kernel/plugin-api.ts';
import { agentTool, agentTools } from '../agent_tools/public.ts';
import { connectorActions, REMOTE_CALL_FAILED, type ConnectorActions } from '../connectors/public.ts';

/**
 * The organization's connector of `type` a tool sends through: the one named by `connector_id`, or
 * the only one there is; none is a 422, several without a choice a 400 listing them.
 */
async function connectorOf(connectors: ConnectorActions, orgId: number, type: string, chosen: number | undefined, argumentsAt: string): Promise<number> {
  const candidates = await connectors.ofType(orgId, type);
  if (chosen !== undefined) {
    if (!candidates.some((c) => c.id === chosen)) throw problems.badRequest(`connector ${chosen} is not a ${type} connector of this organization`, [{ path: `${argumentsAt}.connector_id`, message: `not a ${type} connector` }]);
    return chosen;
  }
  if (candidates.length === 0) throw problems.unprocessable(`this organization has no ${type} connector: add one (POST /api/connectors) first`);
  if (candidates.length > 1) {
    throw problems.badRequest(`this organization has several ${type} connectors: name one as connector_id (${candidates.map((c) => `${c.id} ${c.name}`).join(', ')})`, [{ path: `${argumentsAt}.connector_id`, message: 'required when there are several' }]);
  }
  return candidates[0].id;
}

/**
 * Runs `send_message` of the connector for a tool: a peer that answered an error is a 502 naming its
 * status (to a tool's caller the peer is upstream: its 404 is not "no such tool").
 */
async function sendThrough(connectors: ConnectorActions, call: { orgId: number; connectorId: number; args: unknown; principal: Principal; audit: RequestAudit; argumentsAt: string }): Promise<unknown> {
  try {
    return (await connectors.run(call.orgId, call.connectorId, 'send_message', call.args, call.principal, call.audit, call.argumentsAt)).body;
  } catch (err) {
    if (err instanceof HttpProblem && err.title === REMOTE_CALL_FAILED) throw new HttpProblem(502, err.detail);
    throw err;
  }
}

/**
 * A tool plugin sending through the organization's connector of `type` (its `send_message`): its
 * arguments, `connector_id` among them, mapped to the action's; its answer mapped for the model.
 */
export function connectorTool<A extends { connector_id?: number }>(tool: {
  name: string;
  description: string;
  type: string;
  parameters: Record<string, unknown>;
  actionArgs(args: A): Record<string, unknown>;
  result(answer: unknown): unknown;
}) {
  return definePlugin({
    deps: {},
    init: (_services, ctx) => {
      const connectors = ctx.useService(connectorActions);
      ctx.contribute(
        agentTools,
        agentTool<A>({
          name: tool.name,
          description: tool.description,
          capability: 'connectors.use',
          parameters: tool.parameters,
          async run(args, { orgId, principal, audit, argumentsAt }) {
            const connectorId = await connectorOf(connectors, orgId, tool.type, args.connector_id, argumentsAt);
            return tool.result(await sendThrough(connectors, { orgId, connectorId, args: tool.actionArgs(args), principal, audit, argumentsAt }));
          },
        }),
      );
    },
  });
}
