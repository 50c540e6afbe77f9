import fs from 'node:fs';
import path from 'node:path';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import type { Contribution, Disposable, FieldError, PluginEnablementService } from '../../kernel/plugin-api.ts';
import type { OfferedRecipeType, RecipeTypeCatalog, RecipeTypeContribution } from './public.ts';

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

/** The contribution as offered: params compiled, handler found; a throw names what is wrong. */
async function resolve({ value, pluginId, dir, importModule }: Contribution<RecipeTypeContribution>): Promise<OfferedRecipeType> {
  const validate = compile(value.id, value.params);
  return {
    id: value.id,
    pluginId,
    description: value.description ?? null,
    params: value.params,
    inputs: { min: value.inputs?.min ?? 1, max: value.inputs?.max ?? null },
    outputs: value.outputs ?? 1,
    plan: 'plan' in value ? value.plan : null,
    handler: 'handler' in value ? await findHandler(value.id, value.handler, dir, importModule) : null,
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

/** Module suffixes tried, in order, for a handler module named without one. */
const MODULE_SUFFIXES = ['', '.ts', '.mts', '.js', '.mjs'];

/**
 * The handler's module file and export. It is imported once here, to refuse a contribution whose
 * handler is not a function; each run imports it again in its own worker thread.
 */
async function findHandler(id: string, handler: string, dir: string, importModule: Contribution<unknown>['importModule']) {
  const [modulePath, exportName] = handler.split(':');
  const file = MODULE_SUFFIXES.map((suffix) => path.resolve(dir, modulePath + suffix)).find((candidate) => fs.statSync(candidate, { throwIfNoEntry: false })?.isFile());
  let module: Record<string, unknown>;
  try {
    if (!file) throw new Error(`no module ${modulePath} in ${dir}`);
    module = await importModule(path.relative(dir, file));
  } catch (err) {
    throw new Error(`recipe type "${id}": handler ${handler} cannot be imported: ${(err as Error).message}`);
  }
  if (typeof module[exportName] !== 'function') throw new Error(`recipe type "${id}": handler ${handler} does not export a function named ${exportName}`);
  return { modulePath: file, exportName };
}

/** An ajv error as a field error: its instance path (a missing or extra property named) under `location`. */
function fieldError(error: ErrorObject, location: string): FieldError {
  const segments = error.instancePath.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const named = error.params.missingProperty ?? error.params.additionalProperty;
  if (typeof named === 'string') segments.push(named);
  return { path: [location, ...segments].join('.'), message: error.message ?? 'is invalid' };
}
