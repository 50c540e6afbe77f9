import { definePlugin, HttpProblem, problems, type FieldError } from '../../../kernel/plugin-api.ts';
import type { DataColumn } from '../../../storage/index.ts';
import { llmMesh, type LlmMesh } from '../../llm_mesh/public.ts';
import { recipeType, recipeTypes, type HandledRecipeScope } from '../../pipeline/public.ts';
import { LLM_PROMPT_PARAMS, PLACEHOLDER, type LlmPromptParams, type LlmPromptStart } from './params.ts';

/** The connection, the template's columns and the output column, checked; each problem a 4xx naming the field. */
async function start(mesh: LlmMesh, { orgId, params, inputs }: HandledRecipeScope<LlmPromptParams>): Promise<LlmPromptStart> {
  const [input] = inputs;
  const errors: FieldError[] = [];
  const connection = await mesh.connection(orgId, params.connection_id);
  if (!connection) errors.push({ path: 'body.params.connection_id', message: 'no such LLM connection in this organization' });
  else if (params.model && connection.models.length && !connection.models.includes(params.model)) errors.push({ path: 'body.params.model', message: `not one the connection offers (${connection.models.join(', ')})` });
  const placeholders = [...new Set([...params.prompt_template.matchAll(PLACEHOLDER)].map((m) => m[1]))];
  for (const name of placeholders) {
    if (!input.columns.some((c) => c.name === name)) errors.push({ path: 'body.params.prompt_template', message: `{{${name}}}: dataset ${input.name} has no column ${name}` });
  }
  const output = params.output_column ?? 'llm_output';
  if (input.columns.some((c) => c.name === output)) errors.push({ path: 'body.params.output_column', message: `dataset ${input.name} already has a column ${output}` });
  if (errors.length) throw problems.invalidFields(errors);
  const columns: DataColumn[] = [...input.columns.map(({ name, type }) => ({ name, type })), { name: output, type: 'string' }];
  return { output, placeholders, columns };
}

/**
 * Each prompt through the mesh as the run's user, `concurrency` at a time, answers in input order;
 * a row refused or failed fails the run, or (on_error `null`) is answered null.
 */
async function complete(mesh: LlmMesh, scope: HandledRecipeScope<LlmPromptParams>, prompts: string[]): Promise<(string | null)[]> {
  const { params } = scope;
  const answers: (string | null)[] = new Array(prompts.length).fill(null);
  let next = 0;
  const worker = async () => {
    while (next < prompts.length) {
      const index = next++;
      try {
        const completion = await mesh.complete(
          // As the run's user, for the recipe's project (its quotas, its usage), traced under the run.
          { orgId: scope.orgId, principal: scope.principal, projectId: scope.projectId, ...(scope.runId === undefined ? {} : { requestId: `run-${scope.runId}` }) },
          {
            connection_id: params.connection_id,
            model: params.model,
            messages: [...(params.system_prompt ? [{ role: 'system' as const, content: params.system_prompt }] : []), { role: 'user', content: prompts[index] }],
            ...(params.max_tokens === undefined ? {} : { max_tokens: params.max_tokens }),
            ...(params.temperature === undefined ? {} : { temperature: params.temperature }),
          },
        );
        answers[index] = completion.message.content;
      } catch (err) {
        if (params.on_error !== 'null' || !(err instanceof HttpProblem)) throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(params.concurrency ?? 4, prompts.length) }, worker));
  return answers;
}

/** `llm_prompt`: an AI recipe; each row's prompt (a template over its columns) answered by a model through the LLM mesh. */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const mesh = ctx.useService(llmMesh);
    ctx.contribute(
      recipeTypes,
      recipeType<LlmPromptParams>({
        id: 'llm_prompt',
        description: 'AI: each row\u2019s prompt ({{column}} placeholders) answered by a model through the LLM mesh, the answer in a new column',
        params: LLM_PROMPT_PARAMS,
        inputs: { min: 1, max: 1 },
        handler: 'handler:prompt',
        describe: async (scope) => (await start(mesh, scope)).columns,
        calls: (scope) => ({
          start: () => start(mesh, scope),
          complete: ({ prompts }: { prompts: string[] }) => complete(mesh, scope, prompts),
        }),
      }),
    );
  },
});
