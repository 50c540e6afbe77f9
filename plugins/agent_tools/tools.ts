import { compileParams, OfferedContributions, problems, type Contribution, type Disposable, type ParamsCheck, type PluginEnablementService } from '../../kernel/plugin-api.ts';
import type { AgentToolContribution, AgentToolRunner, FunctionTool, ToolContext } from './public.ts';

interface OfferedTool {
  id: string;
  pluginId: string;
  tool: AgentToolContribution;
  check: ParamsCheck;
}

const mayCall = (tool: AgentToolContribution, context: Pick<ToolContext, 'principal'>) => tool.capability === undefined || context.principal.capabilities.has(tool.capability);

/** The tools contributed to `agent_tools.tools`, offered where their plugin is enabled, and their runs. */
export class Tools implements AgentToolRunner {
  private readonly offered: OfferedContributions<OfferedTool>;

  constructor(ownerId: string, enablement: PluginEnablementService) {
    this.offered = new OfferedContributions(ownerId, enablement);
  }

  accept({ value, pluginId }: Contribution<AgentToolContribution>): Disposable {
    return this.offered.add({ id: value.name, pluginId, tool: value, check: compileParams(`agent tool "${value.name}"`, value.parameters) });
  }

  async list(context: Pick<ToolContext, 'orgId' | 'principal'>): Promise<FunctionTool[]> {
    return (await this.offered.list(context.orgId)).filter((t) => mayCall(t.tool, context)).map(({ tool }) => ({ type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.parameters } }));
  }

  /** Every tool offered anywhere, with its plugin (for the registry's listing). */
  async described(orgId: number | null) {
    return (await this.offered.list(orgId)).map(({ tool, pluginId }) => ({ name: tool.name, plugin_id: pluginId, description: tool.description, parameters: tool.parameters, capability: tool.capability ?? null }));
  }

  async invoke(name: string, args: unknown, context: ToolContext, location = 'body.arguments'): Promise<unknown> {
    const offered = await this.offered.get(context.orgId, name);
    if (!offered) throw problems.notFound(`no agent tool "${name}" in this organization`);
    const { tool, check } = offered;
    if (!mayCall(tool, context)) throw problems.forbidden(`the agent tool "${name}" needs the capability "${tool.capability}"`);
    const errors = check(args, location);
    if (errors.length) throw problems.badRequest(`invalid arguments for ${name}: ${errors.map((e) => `${e.path} ${e.message}`).join('; ')}`, errors);
    // Which arguments were given, never their values (a message, a phone number, a query's text).
    const given = typeof args === 'object' && args !== null ? Object.keys(args) : [];
    try {
      const result = await tool.run(args, { ...context, argumentsAt: location });
      await context.audit.record({ action: 'agent_tools.invoke', targetType: 'agent_tool', targetId: name, details: { arguments: given } });
      return result;
    } catch (err) {
      await context.audit.record({ action: 'agent_tools.invoke', outcome: 'failure', targetType: 'agent_tool', targetId: name, details: { arguments: given, reason: (err as Error).message?.slice(0, 300) } });
      throw err;
    }
  }
}
