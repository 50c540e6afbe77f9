/**
 * The pipeline plugin's public contract: how a plugin contributes a recipe type, and the service
 * through which the pipeline's own code finds one (references and types only).
 */
import { z } from 'zod';
import { defineExtensionPoint, pluginServiceRef, type FieldError } from '../../kernel/plugin-api.ts';

/** A JSON Schema (draft 2020-12, the dialect of OpenAPI 3.1) as a plain object. */
export type JsonSchema = Record<string, unknown>;

/** What a recipe handler is given for one run. */
export interface RecipeRun<P> {
  /** The recipe's parameters, valid against its type's `params` schema. */
  params: P;
  orgId: number;
  /** Aborted when the run is cancelled or times out. */
  signal: AbortSignal;
}

export type RecipeHandler<P = any> = (run: RecipeRun<P>) => unknown;

interface RecipeTypeFields {
  /** Unique across plugins: a second plugin contributing the same id fails to load. */
  id: string;
  description?: string;
  /** The JSON Schema of the parameters, compiled when the type is contributed. */
  params: JsonSchema;
}

/** A recipe type contributed from code, its handler a function. */
export interface CodeRecipeType<P = any> extends RecipeTypeFields {
  run: RecipeHandler<P>;
}

/** A recipe type as a manifest declares it: `handler` names `module:function`, the module relative to the plugin's folder. */
export interface DeclaredRecipeType extends RecipeTypeFields {
  handler: string;
}

export type RecipeTypeContribution = CodeRecipeType | DeclaredRecipeType;

/** A recipe type contributed from code, its handler typed by its parameters. */
export function recipeType<P>(type: CodeRecipeType<P>): CodeRecipeType<P> {
  return type;
}

const contributionSchema = z
  .object({
    id: z.string().regex(/^[a-z][a-z0-9_.-]*$/, 'must be a lower-case identifier such as uppercase_column'),
    description: z.string().optional(),
    params: z.record(z.string(), z.unknown()).describe('JSON Schema of the recipe parameters'),
    handler: z.string().regex(/^[^:]+:[A-Za-z_$][\w$]*$/, 'must be "module:function", module relative to the plugin folder').optional(),
    run: z.custom<RecipeHandler>((value) => typeof value === 'function', 'must be a function').optional(),
  })
  .strict()
  .refine((type) => (type.handler === undefined) !== (type.run === undefined), 'must have either run (a function, from code) or handler ("module:function", from a manifest)');

/**
 * The recipe types (spec §2.7): one per id, from code (`run`) or a manifest's `contributes`
 * (`handler`). The pipeline compiles `params` and resolves the handler when it accepts one: an
 * invalid JSON Schema or a handler that does not import as a function refuses the contribution.
 */
export const recipeTypes = defineExtensionPoint<RecipeTypeContribution>({
  id: 'pipeline.recipe-types',
  key: (type) => type.id,
  schema: contributionSchema,
});

/** A recipe type offered in an organization, its handler resolved and its parameters schema compiled. */
export interface OfferedRecipeType {
  id: string;
  pluginId: string;
  description: string | null;
  params: JsonSchema;
  run: RecipeHandler;
  /** Where `params` fails the type's schema, as field errors under `location` (`body.params.field`); empty when valid. */
  check(params: unknown, location?: string): FieldError[];
}

export interface RecipeTypeCatalog {
  /** The types offered in the organization (null: every one): those whose plugin is enabled there, by id. */
  list(orgId: number | null): Promise<OfferedRecipeType[]>;
  /** The type if it is offered in the organization. */
  get(orgId: number, id: string): Promise<OfferedRecipeType | undefined>;
}

export const pipelineRecipeTypes = pluginServiceRef<RecipeTypeCatalog>('pipeline.recipe-types');
