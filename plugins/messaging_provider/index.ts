import { z } from 'zod';
import { definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { connectorTypes } from '../connectors/public.ts';

/**
 * `messaging_provider` (spec §2.4): WhatsApp-style messages through an HTTP messaging provider,
 * configured per organization. `send_message` POSTs {from, to, text} to `<base_url>/messages`
 * with the provider token as a bearer token.
 */
export default definePlugin({
  deps: { outbound: kernelServices.outbound },
  init: ({ outbound }, ctx) => {
    const call = (config: Record<string, unknown>, path: string, method: string, body?: unknown) =>
      outbound.request(`${String(config.base_url).replace(/\/$/, '')}${path}`, {
        method,
        headers: { authorization: `Bearer ${String(config.token)}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    ctx.contribute(connectorTypes, {
      type: 'messaging_provider',
      description: 'Sends WhatsApp-style messages through a messaging provider\u2019s HTTP API',
      config: z
        .object({
          base_url: z.url({ protocol: /^https?$/, error: 'must be an http or https URL' }),
          sender: z.string().min(1).max(64).describe('Sender id or phone number'),
          token: z.string().min(1).max(4096),
        })
        .strict(),
      secretFields: ['token'],
      targetFields: ['base_url'],
      actions: {
        send_message: {
          description: 'Send a text message to a recipient (E.164 phone number)',
          args: z.object({ recipient: z.string().regex(/^\+[1-9]\d{6,14}$/, 'must be an E.164 phone number such as +33612345678'), text: z.string().min(1).max(4096) }).strict(),
          async run({ config, args }) {
            const response = await call(config, '/messages', 'POST', { from: config.sender, to: args.recipient, text: args.text });
            return { status: response.status, body: response.json ?? response.text };
          },
        },
      },
      async test(config) {
        const response = await call(config, '/health', 'GET');
        return { ok: response.status < 400, message: `the provider answered ${response.status}` };
      },
    });
  },
});
