/**
 * The agent tools' public contract: the extension point tools are contributed to, and the runner
 * other plugins (chat) list and invoke them through, as the API does.
 */
import { defineExtensionPoint, pluginServiceRef, z, type Principal, type RequestAudit } from '../../kernel/plugin-api.ts';

/** Who a tool runs for: the calling user's rights, in their organization, audited on their request. */
export interface ToolContext {
  orgId: number;
  principal: Principal;
  audit: RequestAudit;
  requestId?: string;
}

/** What a tool runs with: its caller's context, and where its arguments sit in the caller's request (`body.arguments`; `arguments` in a chat), to name a field it refuses. */
export type ToolRunContext = ToolContext & { argumentsAt: string };

/** A tool an agent may call, contributed to `agent_tools.tools` from code. */
export interface AgentToolContribution<A = any> {
  /** Unique across plugins; what a model calls it by. */
  name: string;
  /** What it does, for the model: when to call it and what it answers. */
  description: string;
  /** JSON Schema (2020-12) of its arguments, checked before `run` (400 naming `…arguments.<field>`). */
  parameters: Record<string, unknown>;
  /** A capability the caller must hold to call it (the tool's own checks still apply). */
  capability?: string;
  /** Runs with the caller's rights; answers what goes back to the model (JSON). */
  run(args: A, context: ToolRunContext): Promise<unknown>;
}

/** A tool contributed from code, its `run` typed by its arguments. */
export function agentTool<A>(tool: AgentToolContribution<A>): AgentToolContribution<A> {
  return tool;
}

export const agentTools = defineExtensionPoint<AgentToolContribution>({
  id: 'agent_tools.tools',
  key: (tool) => tool.name,
  schema: z
    .object({
      name: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, 'must be a lower-case identifier such as send_to_workflow'),
      description: z.string().min(1).max(4000),
      parameters: z.record(z.string(), z.unknown()).describe('JSON Schema of the arguments'),
      capability: z.string().optional(),
      run: z.custom<AgentToolContribution['run']>((value) => typeof value === 'function', 'must be a function'),
    })
    .strict(),
});

/** A tool as a model is offered it: OpenAI's function-calling format. */
export interface FunctionTool {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export interface AgentToolRunner {
  /** The tools offered in the organization that the caller may call, in the function-calling format. */
  list(context: Pick<ToolContext, 'orgId' | 'principal'>): Promise<FunctionTool[]>;
  /**
   * Runs the tool `name` with `args` as POST /api/agent-tools/{name}/invoke does: 404 for a tool not
   * offered here, 403 without its capability, 400 naming each bad argument under `location`; audited.
   */
  invoke(name: string, args: unknown, context: ToolContext, location?: string): Promise<unknown>;
}

export const agentToolRunner = pluginServiceRef<AgentToolRunner>('agent_tools.runner');
