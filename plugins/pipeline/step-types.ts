import { compileParams, OfferedContributions, type Contribution, type Disposable, type FieldError, type PluginEnablementService } from '../../kernel/plugin-api.ts';
import type { JsonSchema, StepTypeContribution } from './public.ts';

/** A step type offered in an organization, its parameters schema compiled. */
export interface OfferedStepType {
  id: string;
  pluginId: string;
  description: string | null;
  params: JsonSchema;
  run: StepTypeContribution['run'];
  /** Where `params` fails the type's schema, as field errors under `location`; empty when valid. */
  check(params: unknown, location: string): FieldError[];
}

/** The step types contributed to `pipeline.step-types`: a schema that does not compile refuses one. */
export class StepTypes {
  private readonly types: OfferedContributions<OfferedStepType>;

  constructor(ownerId: string, enablement: PluginEnablementService) {
    this.types = new OfferedContributions(ownerId, enablement);
  }

  accept({ value, pluginId }: Contribution<StepTypeContribution>): Disposable {
    const check = compileParams(`step type "${value.id}"`, value.params);
    return this.types.add({ id: value.id, pluginId, description: value.description ?? null, params: value.params, run: value.run, check });
  }

  list(orgId: number | null): Promise<OfferedStepType[]> {
    return this.types.list(orgId);
  }

  /** The types offered in the organization as the API lists them. */
  async described(orgId: number | null) {
    return (await this.types.list(orgId)).map((t) => ({ id: t.id, plugin_id: t.pluginId, description: t.description, params: t.params }));
  }

  get(orgId: number, id: string): Promise<OfferedStepType | undefined> {
    return this.types.get(orgId, id);
  }
}
