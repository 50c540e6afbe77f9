import { definePlugin } from '../../kernel/plugin-api.ts';
import { stepType, stepTypes } from '../pipeline/public.ts';
import { governedSql } from '../sql/public.ts';

/** Rows of the answer kept in the step's output. */
const SAMPLE_ROWS = 10;

/**
 * The step type `sql_check`: a governed query (as POST /api/sql runs it for the run's user) whose
 * answer decides the step: `expect: empty` passes when it answers no row (a query for bad rows),
 * `non_empty` when it answers at least one.
 */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const sql = ctx.useService(governedSql);
    ctx.contribute(
      stepTypes,
      stepType<{ query: string; expect: 'empty' | 'non_empty' }>({
        id: 'sql_check',
        description: 'A governed SELECT whose answer decides the step: expect empty (no bad row) or non_empty',
        params: { type: 'object', properties: { query: { type: 'string', minLength: 1, maxLength: 100_000 }, expect: { enum: ['empty', 'non_empty'] } }, required: ['query', 'expect'], additionalProperties: false },
        async run(context) {
          const answer = await sql.run({ sql: context.params.query, limit: SAMPLE_ROWS }, context.orgId, context.principal, context.audit);
          const empty = answer.row_count === 0;
          const output = { row_count: answer.row_count, truncated: answer.truncated, columns: answer.columns.map((c) => c.name), rows: answer.rows };
          if (empty === (context.params.expect === 'empty')) return { status: 'succeeded', output };
          return { status: 'failed', output, error: context.params.expect === 'empty' ? `the query answered ${answer.row_count}${answer.truncated ? '+' : ''} rows; expected none` : 'the query answered no row; expected some' };
        },
      }),
    );
  },
});
