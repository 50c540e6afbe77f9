import { z } from 'zod';
import { definePlugin, kernelServices } from '../../kernel/plugin-api.ts';
import { connectorTypes } from '../connectors/public.ts';

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http or https URL' });

/**
 * `workflow_webhook` (spec §2.4): `send_message` POSTs {message, metadata} to the configured
 * workflow and returns its answer. The URL carries the receiver's secret (§5.16), so it is a
 * secret field: encrypted at rest, never answered.
 */
export default definePlugin({
  deps: { outbound: kernelServices.outbound },
  init: ({ outbound }, ctx) => {
    ctx.contribute(connectorTypes, {
      type: 'workflow_webhook',
      description: 'Sends messages to a workflow (n8n, Zapier, Make…) through its webhook URL',
      config: z.object({ webhook_url: httpUrl }).strict(),
      secretFields: ['webhook_url'],
      // Itself a secret: pointing it elsewhere means giving it in full, so no stored secret can follow.
      targetFields: ['webhook_url'],
      actions: {
        send_message: {
          description: 'POST {message, metadata} to the webhook; answers what the workflow answered',
          args: z.object({ message: z.string().min(1).max(100_000), metadata: z.record(z.string(), z.unknown()).default({}) }).strict(),
          async run({ config, args }) {
            const response = await outbound.request(String(config.webhook_url), {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ message: args.message, metadata: args.metadata }),
            });
            return { status: response.status, body: response.json ?? response.text };
          },
        },
      },
    });
  },
});
