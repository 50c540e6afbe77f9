import { definePlugin, HttpProblem, problems, type FieldError } from '../../../kernel/plugin-api.ts';
import type { DataColumn } from '../../../storage/index.ts';
import { recipeType, recipeTypes, type HandledRecipeScope } from '../../pipeline/public.ts';
import { registryModels, type RegistryModels } from '../../registry/public.ts';
import { PREDICT_PARAMS, type PredictParams, type PredictStart } from './params.ts';

/** The input column types each feature type is read from. */
const READS: Record<string, string[]> = { integer: ['integer'], number: ['integer', 'number'], string: ['string'], boolean: ['boolean'] };

/**
 * The model's version and the columns the recipe writes: the input's, the prediction (a number for a
 * regression, the class as text for a classifier) and, when asked, the class probabilities (json).
 * Each problem is a 4xx naming the field: a model not of the organization `body.params.model_id`,
 * an input without a feature `body.inputs.0`.
 */
async function start(models: RegistryModels, { orgId, params, inputs }: HandledRecipeScope<PredictParams>): Promise<PredictStart> {
  const signature = await models.signature(orgId, params.model_id, params.version ?? null).catch((err: unknown) => {
    if (!(err instanceof HttpProblem)) throw err;
    const path = err.status === 404 || params.version === undefined ? 'body.params.model_id' : 'body.params.version';
    throw problems.unprocessable(err.message, [{ path, message: err.message }]);
  });
  const [input] = inputs;
  const errors: FieldError[] = [];
  for (const feature of signature.features) {
    const column = input.columns.find((c) => c.name === feature.name);
    if (!column) errors.push({ path: 'body.inputs.0', message: `dataset ${input.name} has no column ${feature.name} (a ${feature.type} feature of model ${params.model_id})` });
    else if (!READS[feature.type].includes(column.type)) errors.push({ path: 'body.inputs.0', message: `column ${feature.name} of dataset ${input.name} is ${column.type}: the model reads a ${feature.type}` });
  }
  const output = params.output_column ?? 'prediction';
  const probabilities = params.probabilities ? `${output}_probabilities` : null;
  for (const [name, field] of [[output, 'output_column'], [probabilities, 'probabilities']] as const) {
    if (name && input.columns.some((c) => c.name === name)) errors.push({ path: `body.params.${field}`, message: `dataset ${input.name} already has a column ${name}` });
  }
  if (probabilities && signature.task !== 'classification') errors.push({ path: 'body.params.probabilities', message: 'a regression model has no class probabilities' });
  if (errors.length) throw problems.invalidFields(errors);
  const columns: DataColumn[] = [
    ...input.columns.map(({ name, type }) => ({ name, type })),
    { name: output, type: signature.task === 'regression' ? 'number' : 'string' },
    ...(probabilities ? [{ name: probabilities, type: 'json' as const }] : []),
  ];
  return { version: signature.version, task: signature.task, features: signature.features.map((f) => f.name), output, probabilities, columns };
}

/**
 * `predict`: batch scoring. The handler runs in a worker thread; the model is the registry's,
 * reached through its service `registry.models` from the main thread (`ctx.call`), and its version
 * is fixed when the run starts (an active version promoted meanwhile scores the next run).
 */
export default definePlugin({
  deps: {},
  init: (_services, ctx) => {
    const models = ctx.useService(registryModels);
    ctx.contribute(
      recipeTypes,
      recipeType<PredictParams>({
        id: 'predict',
        description: 'Scores the input with a model of the registry: its rows plus a prediction column (and class probabilities when asked)',
        params: PREDICT_PARAMS,
        inputs: { min: 1, max: 1 },
        handler: 'handler:predict',
        describe: async (scope) => (await start(models, scope)).columns,
        calls: (scope) => ({
          start: () => start(models, scope),
          predict: ({ version, rows }: { version: number; rows: Record<string, unknown>[] }) => models.predict(scope.orgId, scope.params.model_id, version, rows),
        }),
      }),
    );
  },
});
