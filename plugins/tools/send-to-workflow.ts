import { connectorTool } from './connector-tool.ts';

interface Args {
  message: string;
  metadata?: Record<string, unknown>;
  connector_id?: number;
}

/** `send_to_workflow` (spec §2.4): the `workflow_webhook` connector POSTs {message, metadata}; the workflow's answer goes back to the agent. */
export default connectorTool<Args>({
  name: 'send_to_workflow',
  description: 'Send a message (with optional metadata) to the organization\u2019s workflow (n8n, Zapier, Make…) through its workflow_webhook connector; answers what the workflow answered.',
  type: 'workflow_webhook',
  parameters: {
    type: 'object',
    properties: {
      message: { type: 'string', minLength: 1, maxLength: 100_000, description: 'What to send' },
      metadata: { type: 'object', description: 'Structured data sent along (priority, ids…)' },
      connector_id: { type: 'integer', minimum: 1, description: 'The workflow_webhook connector; needed only when the organization has several' },
    },
    required: ['message'],
    additionalProperties: false,
  },
  actionArgs: (args) => ({ message: args.message, metadata: args.metadata ?? {} }),
  result: (answer) => answer,
});
