import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import type { Contribution, Disposable, FieldError, PluginEnablementService } from '../../kernel/plugin-api.ts';
import type { OfferedRecipeType, RecipeHandler, RecipeTypeCatalog, RecipeTypeContribution } from './public.ts';

/**
 * The recipe types contributed to `pipeline.recipe-types`. A contribution is resolved (its params
 * schema compiled, a manifest's handler imported) before it is accepted: a throw refuses it, and the
 * kernel fails its plugin with the reason.
 */
export class RecipeTypes implements RecipeTypeCatalog {
  private readonly types = new Map<string, OfferedRecipeType>();

  constructor(
    /** The pipeline's own id: where the pipeline is off, no recipe type is offered. */
    private readonly ownerId: string,
    private readonly enablement: PluginEnablementService,
  ) {}

  /** Checks a manifest's contribution before its plugin migrates (the kernel calls it, then `accept`). */
  async check(contribution: Contribution<RecipeTypeContribution>): Promise<void> {
    await resolve(contribution);
  }

  async accept(contribution: Contribution<RecipeTypeContribution>): Promise<Disposable> {
    const type = await resolve(contribution);
    this.types.set(type.id, type);
    // A reloading contributor's new version has replaced this entry before the old one withdraws.
    return () => {
      if (this.types.get(type.id) === type) this.types.delete(type.id);
    };
  }

  async list(orgId: number | null): Promise<OfferedRecipeType[]> {
    const all = [...this.types.values()].sort((a, b) => a.id.localeCompare(b.id));
    if (orgId === null) return all;
    if (!(await this.enablement.isEnabled(this.ownerId, orgId))) return [];
    const offered = await Promise.all(all.map((type) => this.enablement.isEnabled(type.pluginId, orgId)));
    return all.filter((_, i) => offered[i]);
  }

  async get(orgId: number, id: string): Promise<OfferedRecipeType | undefined> {
    const type = this.types.get(id);
    if (!type || !(await this.enablement.isEnabled(this.ownerId, orgId))) return undefined;
    return (await this.enablement.isEnabled(type.pluginId, orgId)) ? type : undefined;
  }
}

/** The contribution as offered: params compiled, handler a function; a throw names what is wrong. */
async function resolve({ value, pluginId, importModule }: Contribution<RecipeTypeContribution>): Promise<OfferedRecipeType> {
  const validate = compile(value.id, value.params);
  const run = 'run' in value ? value.run : await importHandler(value.id, value.handler, importModule);
  return {
    id: value.id,
    pluginId,
    description: value.description ?? null,
    params: value.params,
    run,
    check: (params, location = 'body.params') => (validate(params) ? [] : (validate.errors ?? []).map((error) => fieldError(error, location))),
  };
}

function compile(id: string, params: Record<string, unknown>): ValidateFunction {
  // An instance per type: schemas of different plugins may reuse an `$id` without clashing.
  const ajv = new Ajv2020({ allErrors: true });
  try {
    return ajv.compile(params);
  } catch (err) {
    throw new Error(`recipe type "${id}": params is not a valid JSON Schema: ${(err as Error).message}`);
  }
}

async function importHandler(id: string, handler: string, importModule: Contribution<unknown>['importModule']): Promise<RecipeHandler> {
  const [modulePath, exportName] = handler.split(':');
  let module: Record<string, unknown>;
  try {
    module = await importModule(modulePath);
  } catch (err) {
    throw new Error(`recipe type "${id}": handler ${handler} cannot be imported: ${(err as Error).message}`);
  }
  const run = module[exportName];
  if (typeof run !== 'function') throw new Error(`recipe type "${id}": handler ${handler} does not export a function named ${exportName}`);
  return run as RecipeHandler;
}

/** An ajv error as a field error: its instance path (a missing or extra property named) under `location`. */
function fieldError(error: ErrorObject, location: string): FieldError {
  const segments = error.instancePath.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const named = error.params.missingProperty ?? error.params.additionalProperty;
  if (typeof named === 'string') segments.push(named);
  return { path: [location, ...segments].join('.'), message: error.message ?? 'is invalid' };
}
