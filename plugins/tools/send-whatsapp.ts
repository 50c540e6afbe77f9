import { connectorTool } from './connector-tool.ts';

interface Args {
  to: string;
  message: string;
  connector_id?: number;
}

/** `send_whatsapp` (spec §2.4): a WhatsApp-style message through the organization's `messaging_provider` connector. */
export default connectorTool<Args>({
  name: 'send_whatsapp',
  description: 'Send a WhatsApp-style text message to a phone number through the organization\u2019s messaging provider.',
  type: 'messaging_provider',
  parameters: {
    type: 'object',
    properties: {
      to: { type: 'string', pattern: '^\\+[1-9][0-9]{6,14}$', description: 'The recipient, an E.164 phone number such as +33612345678' },
      message: { type: 'string', minLength: 1, maxLength: 4096 },
      connector_id: { type: 'integer', minimum: 1, description: 'The messaging_provider connector; needed only when the organization has several' },
    },
    required: ['to', 'message'],
    additionalProperties: false,
  },
  actionArgs: (args) => ({ recipient: args.to, text: args.message }),
  result: (answer) => ({ sent: true, provider_answer: answer }),
});
