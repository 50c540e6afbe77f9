import { definePlugin } from '../../kernel/plugin-api.ts';
import { agentTool, agentTools } from '../agent_tools/public.ts';
import { governedSql } from '../sql/public.ts';

interface Args {
  sql: string;
  params?: unknown[];
  limit?: number;
}

const MAX_ROWS = 200;

/** `sql_query`: one read-only query over the organization's datasets, exactly as POST /api/sql runs it for the user (checks, masking, row policies, audit). */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const sql = ctx.useService(governedSql);
    ctx.contribute(
      agentTools,
      agentTool<Args>({
        name: 'sql_query',
        description: `Run one read-only SELECT over the organization\u2019s datasets (tables named as the datasets), values passed as $1, $2… in params; at most ${MAX_ROWS} rows. Personal data is masked unless the user may see it.`,
        capability: 'datasets.read',
        parameters: {
          type: 'object',
          properties: {
            sql: { type: 'string', minLength: 1, maxLength: 100_000 },
            params: { type: 'array', maxItems: 100, items: { type: ['string', 'number', 'boolean', 'null'] } },
            limit: { type: 'integer', minimum: 1, maximum: MAX_ROWS, default: 50 },
          },
          required: ['sql'],
          additionalProperties: false,
        },
        async run(args, { orgId, principal, audit }) {
          const result = await sql.run({ sql: args.sql, params: args.params, limit: args.limit ?? 50 }, orgId, principal, audit);
          return { columns: result.columns, rows: result.rows, row_count: result.row_count, truncated: result.truncated };
        },
      }),
    );
  },
});
