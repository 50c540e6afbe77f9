import type { RecipeHandlerContext } from '../../pipeline/public.ts';
import type { PredictParams, PredictStart } from './params.ts';

/** Rows per call of the model: one copy across threads each way, a batch the output loads at once. */
const BATCH_ROWS = 2_000;

/** The `predict` recipe type's handler (a worker thread): the input's rows, each with its prediction. */
export async function predict(ctx: RecipeHandlerContext<PredictParams>) {
  const [input] = ctx.inputs;
  const start: PredictStart = await ctx.call('start');
  await ctx.output.columns(start.columns);
  let batch: Record<string, unknown>[] = [];
  let scored = 0;
  const flush = async () => {
    const rows = batch.map((row) => Object.fromEntries(start.features.map((f) => [f, row[f]])));
    const answer: { predictions: unknown[]; probabilities?: Record<string, number>[] } = await ctx.call('predict', { version: start.version, rows });
    await ctx.output.write(
      batch.map((row, i) => ({
        ...row,
        // A class as text: the column's type is one whatever the classes' (integer, boolean, string).
        [start.output]: start.task === 'regression' ? answer.predictions[i] : String(answer.predictions[i]),
        ...(start.probabilities ? { [start.probabilities]: answer.probabilities?.[i] ?? null } : {}),
      })),
    );
    scored += batch.length;
    batch = [];
  };
  for await (const row of input.rows()) {
    batch.push(row);
    if (batch.length >= BATCH_ROWS) await flush();
  }
  if (batch.length) await flush();
  ctx.log.info(`scored ${scored} rows of ${input.dataset.name} with version ${start.version} of model ${ctx.params.model_id}`);
}
