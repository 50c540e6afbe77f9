import { compileParams, HttpProblem, problems, type FieldError, type ParamsCheck, type Principal } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog, DatasetInfo } from '../datasets/public.ts';
import type { ProjectCatalog } from '../projects/public.ts';
import { ALGORITHMS, ONLY_TASK, PARAMS_SCHEMAS, type Algorithm, type Task } from './algorithms.ts';
import type { Feature } from './encoding.ts';
import type { TrainInput } from './schemas.ts';

const FEATURE_TYPES = new Set(['integer', 'number', 'string', 'boolean']);
/** The target types of each task: a number to regress, a value to classify. */
const TARGET_TYPES: Record<Task, Set<string>> = { regression: new Set(['integer', 'number']), classification: new Set(['integer', 'string', 'boolean']) };

const paramsChecks = Object.fromEntries(ALGORITHMS.map((a) => [a, compileParams(`algorithm ${a}`, PARAMS_SCHEMAS[a])])) as Record<Algorithm, ParamsCheck>;

/**
 * Whether the dataset's columns fit a training request as the caller may read them: each problem a
 * field error under `body`. PII columns (feature or target) need `datasets.pii.read` (403).
 */
export function checkColumns(catalog: DatasetCatalog, principal: Principal, dataset: DatasetInfo, task: Task, target: string, features: string[]): Feature[] {
  const byName = new Map(dataset.columns.map((c) => [c.name, c]));
  const errors: FieldError[] = [];
  const targetColumn = byName.get(target);
  if (!targetColumn) errors.push({ path: 'body.target', message: `no column ${target} in dataset ${dataset.id}` });
  else if (!TARGET_TYPES[task].has(targetColumn.type)) errors.push({ path: 'body.target', message: `a ${targetColumn.type} column cannot be the target of a ${task} (use ${[...TARGET_TYPES[task]].join(', ')})` });
  features.forEach((name, i) => {
    const column = byName.get(name);
    const path = `body.features.${i}`;
    if (!column) errors.push({ path, message: `no column ${name} in dataset ${dataset.id}` });
    else if (name === target) errors.push({ path, message: 'is the target' });
    else if (features.indexOf(name) !== i) errors.push({ path, message: 'is named twice' });
    else if (!FEATURE_TYPES.has(column.type)) errors.push({ path, message: `a ${column.type} column cannot be a feature (use integer, number, string or boolean)` });
  });
  if (errors.length) throw problems.invalidFields(errors);
  // A class is shown to every reader of the model (metrics' confusion matrix, predictions,
  // probabilities): a PII column's values would reach people who may not see them.
  if (task === 'classification' && targetColumn?.pii) throw problems.badRequest(`${target} is a PII column: its values cannot be a classification's classes`, [{ path: 'body.target', message: 'is a PII column' }]);
  if (!catalog.seesPii(principal)) {
    const pii = [target, ...features].map((name, i) => ({ name, path: i === 0 ? 'body.target' : `body.features.${i - 1}` })).filter(({ name }) => byName.get(name)!.pii);
    if (pii.length) throw new HttpProblem(403, `training on PII columns (${pii.map((p) => p.name).join(', ')}) needs the capability "datasets.pii.read"`, { errors: pii.map(({ path }) => ({ path, message: 'is a PII column' })) });
  }
  return features.map((name) => ({ name, type: byName.get(name)!.type as Feature['type'] }));
}

/** A training request checked against the project, the dataset and the algorithm: answers the dataset and the features with their types. */
export async function checkTraining(catalog: DatasetCatalog, projects: ProjectCatalog, principal: Principal, orgId: number, body: TrainInput): Promise<{ dataset: DatasetInfo; features: Feature[] }> {
  if (!(await projects.exists(orgId, body.project_id))) throw problems.unprocessable(`project ${body.project_id} does not exist in this organization`, [{ path: 'body.project_id', message: 'no such project' }]);
  const dataset = await Promise.resolve(catalog.get(orgId, body.dataset_id)).catch(() => {
    throw problems.unprocessable(`dataset ${body.dataset_id} does not exist in this organization`, [{ path: 'body.dataset_id', message: 'no such dataset' }]);
  });
  const only = ONLY_TASK[body.algorithm];
  if (only && only !== body.task) throw problems.badRequest(`${body.algorithm} is for ${only} only`, [{ path: 'body.algorithm', message: `${body.algorithm} is for ${only} only, not ${body.task}` }]);
  const paramErrors = paramsChecks[body.algorithm](body.params, 'body.params');
  if (paramErrors.length) throw problems.badRequest(`params do not fit algorithm ${body.algorithm}`, paramErrors);
  return { dataset, features: checkColumns(catalog, principal, dataset, body.task, body.target, body.features) };
}
