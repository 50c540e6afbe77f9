import fs from 'node:fs';
import path from 'node:path';
import { compileParams, OfferedContributions, type Contribution, type Disposable, type PluginEnablementService } from '../../kernel/plugin-api.ts';
import type { OfferedRecipeType, RecipeTypeCatalog, RecipeTypeContribution } from './public.ts';

/**
 * The recipe types contributed to `pipeline.recipe-types`. A contribution is resolved (its params
 * schema compiled, a manifest's handler imported) before it is accepted: a throw refuses it, and the
 * kernel fails its plugin with the reason.
 */
export class RecipeTypes implements RecipeTypeCatalog {
  private readonly types: OfferedContributions<OfferedRecipeType>;

  constructor(ownerId: string, enablement: PluginEnablementService) {
    this.types = new OfferedContributions(ownerId, enablement);
  }

  /** Checks a manifest's contribution before its plugin migrates (the kernel calls it, then `accept`). */
  async check(contribution: Contribution<RecipeTypeContribution>): Promise<void> {
    await resolve(contribution);
  }

  async accept(contribution: Contribution<RecipeTypeContribution>): Promise<Disposable> {
    return this.types.add(await resolve(contribution));
  }

  list(orgId: number | null): Promise<OfferedRecipeType[]> {
    return this.types.list(orgId);
  }

  get(orgId: number, id: string): Promise<OfferedRecipeType | undefined> {
    return this.types.get(orgId, id);
  }
}

/** The contribution as offered: params compiled, handler found; a throw names what is wrong. */
async function resolve({ value, pluginId, dir, importModule }: Contribution<RecipeTypeContribution>): Promise<OfferedRecipeType> {
  const check = compileParams(`recipe type "${value.id}"`, value.params);
  return {
    id: value.id,
    pluginId,
    description: value.description ?? null,
    params: value.params,
    inputs: { min: value.inputs?.min ?? 1, max: value.inputs?.max ?? null },
    outputs: value.outputs ?? 1,
    plan: 'plan' in value ? value.plan : null,
    handler: 'handler' in value ? { ...(await findHandler(value.id, value.handler, dir, importModule)), describe: value.describe ?? null, calls: value.calls ?? null } : null,
    check: (params, location = 'body.params') => check(params, location),
  };
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
