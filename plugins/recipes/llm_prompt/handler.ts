import type { RecipeHandlerContext } from '../../pipeline/public.ts';
import { fillTemplate, type LlmPromptParams, type LlmPromptStart } from './params.ts';

/** The `llm_prompt` recipe type's handler (a worker thread): the input's rows, each with the model's answer to its prompt. */
export async function prompt(ctx: RecipeHandlerContext<LlmPromptParams>) {
  const [input] = ctx.inputs;
  const start: LlmPromptStart = await ctx.call('start');
  await ctx.output.columns(start.columns);
  const size = ctx.params.batch_size ?? 20;
  let batch: Record<string, unknown>[] = [];
  let done = 0;
  const flush = async () => {
    const answers: (string | null)[] = await ctx.call('complete', { prompts: batch.map((row) => fillTemplate(ctx.params.prompt_template, row)) });
    await ctx.output.write(batch.map((row, i) => ({ ...row, [start.output]: answers[i] })));
    done += batch.length;
    batch = [];
    ctx.log.info(`${done} rows answered`);
  };
  for await (const row of input.rows()) {
    batch.push(row);
    if (batch.length >= size) await flush();
  }
  if (batch.length) await flush();
}
