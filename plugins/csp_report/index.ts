import { z } from 'zod';
import { definePlugin, defineRoute, kernelServices, reply } from '../../kernel/plugin-api.ts';

const MAX_LOGGED_CHARS = 2000;

/** `POST /api/csp-report`: browsers' Content-Security-Policy violation reports, logged only (spec §6). */
export default definePlugin({
  deps: { logger: kernelServices.logger },
  init: ({ logger }) => ({
    routes: [
      defineRoute({
        method: 'post',
        path: '',
        summary: 'Receive a browser CSP violation report (logged, not stored)',
        description:
          'Target of the pages\' Content-Security-Policy `report-uri`: browsers post violation reports here without credentials. Each report is logged as a warning for operators and nothing is stored; answers 204.',
        security: 'none',
        request: {
          body: z.union([z.record(z.string(), z.unknown()), z.array(z.unknown())]).describe('A report-uri (csp-report) or Reporting API (reports+json) payload'),
          bodyTypes: ['application/csp-report', 'application/reports+json', 'application/json'],
          bodyLimit: '16kb',
        },
        responses: { 204: { description: 'Received' } },
        handler: ({ body, koa }) => {
          logger.warn({ csp_report: JSON.stringify(body).slice(0, MAX_LOGGED_CHARS), user_agent: koa.get('User-Agent').slice(0, 200) }, 'CSP violation reported');
          return reply(204);
        },
      }),
    ],
  }),
});
