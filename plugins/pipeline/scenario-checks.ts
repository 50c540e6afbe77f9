import { problems } from '../../kernel/plugin-api.ts';
import type { DatasetCatalog } from '../datasets/public.ts';
import type { ProjectCatalog } from '../projects/public.ts';
import type { ScenarioReporter, ScenarioStepInput, ScenarioTrigger } from './scenario-schemas.ts';
import type { ScenarioFields, ScenarioStep } from './scenario-store.ts';
import type { StepTypes } from './step-types.ts';

/** What a scenario must be to be saved: each problem names the field (`body.steps.2.params.fail_on`). */
export class ScenarioChecks {
  constructor(
    private readonly projects: ProjectCatalog,
    private readonly catalog: DatasetCatalog,
    private readonly stepTypes: StepTypes,
  ) {}

  /** The scenario's fields as saved (each step named, its params checked against its type), or a 4xx problem. */
  async check(orgId: number, fields: { project_id: number; name: string; steps: ScenarioStepInput[]; triggers: ScenarioTrigger[]; reporters: ScenarioReporter[] }): Promise<ScenarioFields> {
    if (!(await this.projects.exists(orgId, fields.project_id))) throw problems.unprocessable(`project ${fields.project_id} does not exist in this organization`, [{ path: 'body.project_id', message: 'no such project' }]);
    const steps: ScenarioStep[] = [];
    for (const [i, step] of fields.steps.entries()) {
      const type = await this.stepTypes.get(orgId, step.type);
      if (!type) throw problems.unprocessable(`step type "${step.type}" is not offered in this organization (unknown, or its plugin is disabled here)`, [{ path: `body.steps.${i}.type`, message: `unknown step type ${step.type}` }]);
      const errors = type.check(step.params, `body.steps.${i}.params`);
      if (errors.length) throw problems.badRequest(`the params of step ${i} do not match the step type ${step.type}`, errors);
      steps.push({ type: step.type, name: step.name ?? step.type, params: step.params, continue_on_failure: step.continue_on_failure });
    }
    for (const [i, trigger] of fields.triggers.entries()) {
      if (trigger.type !== 'dataset_changed') continue;
      for (const [j, id] of trigger.datasets.entries()) {
        await Promise.resolve(this.catalog.get(orgId, id)).catch(() => {
          throw problems.unprocessable(`dataset ${id} does not exist in this organization`, [{ path: `body.triggers.${i}.datasets.${j}`, message: 'no such dataset' }]);
        });
      }
    }
    return { project_id: fields.project_id, name: fields.name, steps, triggers: fields.triggers, reporters: fields.reporters };
  }
}
