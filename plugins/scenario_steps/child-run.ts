import type { Run, StepContext, StepResult } from '../pipeline/public.ts';

const ENDED = ['succeeded', 'failed', 'cancelled', 'skipped'];

/**
 * A step that starts a child run and waits for it: the run it started before (asked again after
 * answering `waiting`, or resumed after a restart) is found among its child runs, so a restart
 * never starts it twice; the step ends as the child run does.
 */
export async function untilChildEnds(context: StepContext, start: () => Promise<Run>): Promise<StepResult> {
  const [started] = await context.childRuns();
  const run = started ?? (await start());
  if (!ENDED.includes(run.status)) return { status: 'waiting', output: { run_id: run.id } };
  const output = { run_id: run.id, status: run.status, rows_written: run.rows_written };
  if (run.status === 'succeeded') return { status: 'succeeded', output };
  return { status: 'failed', output, error: `run ${run.id} ended ${run.status}${run.error ? `: ${run.error.detail}` : ''}` };
}
