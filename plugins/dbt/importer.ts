import { HttpProblem, problems, type Principal, type RequestAudit } from '../../kernel/plugin-api.ts';
import type { Logger } from 'pino';
import type { DatasetCatalog, DatasetInfo } from '../datasets/public.ts';
import type { QualityRuleInput, QualityRules } from '../data_quality_rules/public.ts';
import type { PipelineRecipes, RecipeRecord } from '../pipeline/public.ts';
import type { ProjectCatalog } from '../projects/public.ts';
import { platformType } from './column-types.ts';
import { rewriteCompiled } from './compiled-sql.ts';
import { candidateNames, datasetNames } from './dataset-names.ts';
import type { DbtImport, ImportedObject, ImportStore, ImportSummary, ObjectKind } from './import-store.ts';
import { readCatalog, readManifest, type DbtResource, type DbtTest } from './manifest.ts';
import { renderModels, renderTargets, type Rendered } from './render.ts';
import type { ImportRequest } from './request-body.ts';

export interface ImporterDeps {
  catalog: DatasetCatalog;
  recipes: PipelineRecipes;
  rules: QualityRules;
  projects: ProjectCatalog;
  store: ImportStore;
  logger: Logger;
}

/** Why a resource or test is not imported: said in `skipped`, never dropped silently. */
class Skip extends Error {}

/** A 4xx problem's detail with its field errors, as a reason; anything else is not a reason (it is a fault). */
function reasonOf(err: unknown): string {
  if (err instanceof Skip) return err.message;
  if (err instanceof HttpProblem && err.status < 500) {
    const fields = (err.options.errors ?? []).filter((e) => !err.detail.includes(e.message)).map((e) => `${e.path}: ${e.message}`);
    return [err.detail, ...fields].join('; ').slice(0, 2000);
  }
  throw err;
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** What the import created or changed, to undo it if a fault stops it halfway. */
interface Undo {
  datasets: number[];
  recipes: number[];
  updatedRecipes: RecipeRecord[];
  rules: number[];
}

/**
 * Imports a dbt project's manifest into a project: its models, seeds, snapshots and sources become
 * datasets, each model a `sql` recipe reading its `depends_on` datasets, generic tests data-quality
 * rules. Everything is checked by the services that own it, as for a client (the governed-SQL
 * rules for a recipe's query); what they refuse is `skipped` with their reason. A fault (not a
 * refusal) undoes what this import created and changed before it is raised.
 */
export async function importManifest(deps: ImporterDeps, orgId: number, principal: Principal, audit: RequestAudit, request: ImportRequest): Promise<DbtImport> {
  const project = readManifest(request.manifest);
  const columnTypes = request.catalog === undefined ? new Map<string, Map<string, string>>() : readCatalog(request.catalog);
  if (!(await deps.projects.exists(orgId, request.projectId))) throw problems.unprocessable(`project ${request.projectId} does not exist in this organization`, [{ path: 'body.project_id', message: 'no such project' }]);
  const previous = await deps.store.objects(orgId, request.projectId);
  const summary: ImportSummary = { datasets_created: 0, datasets_updated: 0, recipes_created: 0, recipes_updated: 0, lineage_edges: 0, rules_created: 0, skipped: [...project.ignored], removed: [] };
  const objects: ImportedObject[] = [];
  const undo: Undo = { datasets: [], recipes: [], updatedRecipes: [], rules: [] };
  const skip = (uniqueId: string, err: unknown) => summary.skipped.push({ unique_id: uniqueId, reason: reasonOf(err) });
  try {
    const datasets = await importDatasets(deps, orgId, principal, request.projectId, project.resources, columnTypes, previous.dataset, summary, undo, skip);
    for (const [uniqueId, dataset] of datasets) objects.push({ unique_id: uniqueId, kind: 'dataset', ref_id: dataset.id });
    const recipes = await importModels(deps, orgId, principal, request.projectId, project.resources, datasets, previous.recipe, summary, undo, skip);
    for (const [uniqueId, recipe] of recipes) objects.push({ unique_id: uniqueId, kind: 'recipe', ref_id: recipe.id });
    const rules = await importTests(deps, orgId, principal, audit, project.tests, datasets, previous.rule, summary, undo, skip);
    for (const [uniqueId, ruleId] of rules) objects.push({ unique_id: uniqueId, kind: 'rule', ref_id: ruleId });
    // What earlier imports made from resources the manifest no longer has: reported once, left as they are.
    const present = new Set([...project.resources.map((r) => r.uniqueId), ...project.tests.map((t) => t.uniqueId)]);
    for (const kind of ['dataset', 'recipe', 'rule'] as ObjectKind[]) {
      for (const [uniqueId, refId] of previous[kind]) if (!present.has(uniqueId)) summary.removed.push({ unique_id: uniqueId, kind, ref_id: refId });
    }
    // A resource refused this time keeps what an earlier import made of it.
    const kept = new Set(objects.map((o) => `${o.kind}:${o.unique_id}`));
    for (const kind of ['dataset', 'recipe', 'rule'] as ObjectKind[]) {
      for (const [uniqueId, refId] of previous[kind]) if (present.has(uniqueId) && !kept.has(`${kind}:${uniqueId}`)) objects.push({ unique_id: uniqueId, kind, ref_id: refId });
    }
    return await deps.store.save(orgId, { project_id: request.projectId, schema_version: project.schemaVersion, dbt_version: project.dbtVersion, dbt_project: project.projectName, summary, created_by: 'userId' in principal ? principal.userId : null }, objects);
  } catch (err) {
    await undoImport(deps, orgId, principal, audit, undo);
    throw err;
  }
}

/** Removes what the import created and puts back the recipes it changed (best effort: each step on its own). */
async function undoImport(deps: ImporterDeps, orgId: number, principal: Principal, audit: RequestAudit, undo: Undo): Promise<void> {
  const steps = [
    ...undo.rules.map((id) => () => deps.rules.remove(orgId, id, audit)),
    ...undo.recipes.reverse().map((id) => () => deps.recipes.remove(orgId, id)),
    ...undo.updatedRecipes.map((r) => () => deps.recipes.update(orgId, r.id, { name: r.name, type: r.type, inputs: r.inputs, outputs: r.outputs, params: r.params }, principal)),
    ...undo.datasets.reverse().map((id) => () => deps.catalog.remove(orgId, id)),
  ];
  for (const step of steps) await step().catch((err) => deps.logger.warn({ err }, 'undoing part of a failed dbt import failed'));
}

type SkipFn = (uniqueId: string, err: unknown) => void;

/**
 * The columns a seed, snapshot or source is declared with: catalog.json's, when given for it (every
 * column the warehouse has, in its order; a name the warehouse folded to upper case, as Snowflake
 * does, lower-cased as Postgres folds it, unless the manifest spells it), else the manifest's when
 * every type is known (`data_type`, a seed's `column_types`); else none, and its first upload gives
 * them. A model's columns are what its recipe writes.
 */
function declaredColumns(resource: DbtResource, catalogTypes: Map<string, string> | undefined) {
  if (resource.resourceType === 'model') return [];
  const documented = new Map(resource.columns.map((c) => [c.name.toLowerCase(), c]));
  if (catalogTypes?.size) {
    return [...catalogTypes].map(([name, type]) => {
      const own = documented.get(name.toLowerCase());
      return { name: own?.name ?? (name === name.toUpperCase() ? name.toLowerCase() : name), type: platformType(type), description: own?.description || null };
    });
  }
  const named = resource.columns.length ? resource.columns.map((c) => c.name) : Object.keys(resource.columnTypes);
  const columns = named.map((name) => {
    const type = documented.get(name.toLowerCase())?.dataType ?? resource.columnTypes[name];
    return { name, type: type ? platformType(type) : null, description: documented.get(name.toLowerCase())?.description || null };
  });
  if (columns.length === 0 || columns.some((c) => c.type === null)) return [];
  return columns.map((c) => ({ ...c, type: c.type! }));
}

/** No rows, for a load that only sets a dataset's columns. */
async function* emptyBatches(): AsyncIterable<unknown[][]> {}

async function importDatasets(
  deps: ImporterDeps,
  orgId: number,
  principal: Principal,
  projectId: number,
  resources: DbtResource[],
  columnTypes: Map<string, Map<string, string>>,
  previous: Map<string, number>,
  summary: ImportSummary,
  undo: Undo,
  skip: SkipFn,
): Promise<Map<string, DatasetInfo>> {
  const importable = resources.filter((r) => {
    if (r.resourceType === 'model' && r.language !== 'sql') skip(r.uniqueId, new Skip(`a ${r.language} model is not imported: only SQL models run here`));
    return r.resourceType !== 'model' || r.language === 'sql';
  });
  // Datasets of earlier imports, unless deleted since.
  const existing = new Map<string, DatasetInfo>();
  for (const [uniqueId, id] of previous) {
    if (!importable.some((r) => r.uniqueId === uniqueId)) continue;
    const dataset = await Promise.resolve(deps.catalog.get(orgId, id)).catch(() => null);
    if (dataset) existing.set(uniqueId, dataset);
  }
  const others = await deps.catalog.findByNames(orgId, [...new Set(importable.flatMap((r) => candidateNames(r, 12)))]);
  const ownIds = new Set([...existing.values()].map((d) => d.id));
  const foreign = new Map(others.filter((d) => !ownIds.has(d.id)).map((d) => [d.name.toLowerCase(), d]));
  const names = datasetNames(
    importable,
    new Map([...existing].map(([id, d]) => [id, d.name])),
    (name) => foreign.has(name),
    (resource, name) => resource.resourceType !== 'model' && foreign.get(name)!.project_id === projectId,
  );
  const result = new Map<string, DatasetInfo>();
  for (const resource of importable) {
    const name = names.get(resource.uniqueId)!;
    const docs = { description: resource.description || null, columns: resource.columns.map((c) => ({ name: c.name, description: c.description || null })) };
    try {
      const current = existing.get(resource.uniqueId) ?? foreign.get(name);
      const columns = declaredColumns(resource, columnTypes.get(resource.uniqueId));
      if (current) {
        // Imported before, or a seed's or source's data already in the project (adopted). Still
        // without columns or rows, it takes the columns now known (a catalog given this time): as
        // an empty load that replaces its schema.
        const declared = current.columns.length === 0 && current.row_count === 0 && columns.length > 0;
        if (declared) await deps.catalog.load(current, columns, emptyBatches(), 'replace');
        const { dataset, changed } = await deps.catalog.describe(orgId, current.id, docs);
        if (changed || declared || !existing.has(resource.uniqueId)) summary.datasets_updated++;
        result.set(resource.uniqueId, dataset);
      } else {
        const dataset = await deps.catalog.create(orgId, projectId, { name, description: docs.description, columns }, principal);
        undo.datasets.push(dataset.id);
        summary.datasets_created++;
        result.set(resource.uniqueId, dataset);
      }
    } catch (err) {
      skip(resource.uniqueId, err);
    }
  }
  return result;
}

/** Models in an order where each comes after the models it depends on (a cycle's members keep the manifest's order). */
function dependencyOrder(models: DbtResource[]): DbtResource[] {
  const byId = new Map(models.map((m) => [m.uniqueId, m]));
  const ordered: DbtResource[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (model: DbtResource) => {
    if (state.has(model.uniqueId)) return;
    state.set(model.uniqueId, 'visiting');
    for (const dep of model.dependsOn) if (byId.has(dep)) visit(byId.get(dep)!);
    state.set(model.uniqueId, 'done');
    ordered.push(model);
  };
  models.forEach(visit);
  return ordered;
}

/** Each model's SQL with relations named by dataset: its compiled SQL rewritten, else its raw Jinja rendered. */
async function modelSql(models: DbtResource[], resources: DbtResource[], datasetNamesOf: Map<string, string>): Promise<Map<string, Rendered>> {
  const sql = new Map<string, Rendered>();
  const jobs = [];
  for (const model of models) {
    const compiled = model.compiledCode ? rewriteCompiled(model, model.compiledCode, resources, datasetNamesOf) : null;
    if (compiled) sql.set(model.uniqueId, compiled);
    else if (model.rawCode !== null) jobs.push({ uniqueId: model.uniqueId, packageName: model.packageName, rawCode: model.rawCode, dataset: datasetNamesOf.get(model.uniqueId)! });
    else sql.set(model.uniqueId, { error: 'the manifest holds neither its compiled SQL nor its raw code' });
  }
  if (jobs.length) for (const [id, rendered] of await renderModels(jobs, renderTargets(resources, datasetNamesOf))) sql.set(id, rendered);
  return sql;
}

async function importModels(
  deps: ImporterDeps,
  orgId: number,
  principal: Principal,
  projectId: number,
  resources: DbtResource[],
  datasets: Map<string, DatasetInfo>,
  previous: Map<string, number>,
  summary: ImportSummary,
  undo: Undo,
  skip: SkipFn,
): Promise<Map<string, RecipeRecord>> {
  const models = dependencyOrder(resources.filter((r) => r.resourceType === 'model' && datasets.has(r.uniqueId)));
  const byId = new Map(resources.map((r) => [r.uniqueId, r]));
  const sqlOf = await modelSql(models, resources, new Map([...datasets].map(([id, d]) => [id, d.name])));
  const result = new Map<string, RecipeRecord>();
  for (const model of models) {
    try {
      const rendered = sqlOf.get(model.uniqueId)!;
      if ('error' in rendered) throw new Skip(`its SQL could not be made: ${rendered.error}`);
      const reads = [...new Set([...model.dependsOn, ...rendered.reads])];
      const inputs: number[] = [];
      for (const id of reads) {
        const input = datasets.get(id);
        const resource = byId.get(id);
        if (!input || !resource) throw new Skip(`it depends on ${id}, which is not imported`);
        if (resource.resourceType === 'model' && !result.has(id)) throw new Skip(`it depends on ${id}, which was skipped`);
        if (resource.resourceType !== 'model' && input.columns.length === 0) throw new Skip(`its input ${id} (dataset "${input.name}") has no columns yet: load its data (or give catalog.json) and import again`);
        if (!inputs.includes(input.id)) inputs.push(input.id);
      }
      if (inputs.length === 0) throw new Skip('it reads no dataset (a recipe reads at least one)');
      const definition = { name: model.uniqueId.slice(0, 200), type: 'sql', inputs, outputs: [datasets.get(model.uniqueId)!.id], params: { query: rendered.sql.trim().replace(/;\s*$/, '') } };
      const earlier = previous.has(model.uniqueId) ? await deps.recipes.get(orgId, previous.get(model.uniqueId)!).catch(() => null) : null;
      let recipe: RecipeRecord;
      if (earlier && JSON.stringify([earlier.inputs, earlier.outputs, earlier.params, earlier.type]) === JSON.stringify([definition.inputs, definition.outputs, definition.params, definition.type])) {
        recipe = earlier;
      } else if (earlier) {
        recipe = await deps.recipes.update(orgId, earlier.id, definition, principal);
        undo.updatedRecipes.push(earlier);
        summary.recipes_updated++;
      } else {
        recipe = await deps.recipes.create(orgId, { project_id: projectId, ...definition }, principal);
        undo.recipes.push(recipe.id);
        summary.recipes_created++;
      }
      result.set(model.uniqueId, recipe);
      summary.lineage_edges += recipe.inputs.length;
    } catch (err) {
      skip(model.uniqueId, err);
    }
  }
  return result;
}

/** A dbt generic test as a rule of the data-quality plugin, or why there is none. */
function ruleFor(test: DbtTest, datasets: Map<string, DatasetInfo>): Omit<QualityRuleInput, 'dataset_id'> {
  if (test.testName === null) throw new Skip('a singular test (a SQL file) has no matching rule type');
  const name = test.namespace && test.namespace !== 'dbt' ? `${test.namespace}.${test.testName}` : test.testName;
  const column = test.columnName;
  const needsColumn = () => {
    if (!column) throw new Skip(`the ${name} test names no column`);
    return column;
  };
  const rule = (type: QualityRuleInput['type'], params: Record<string, unknown>) => ({ name: test.uniqueId.slice(0, 200), type, params, severity: 'error' as const });
  switch (name) {
    case 'not_null':
      return rule('not_null', { column: needsColumn() });
    case 'unique':
      return rule('unique', { column: needsColumn() });
    case 'accepted_values':
      return rule('allowed_values', { column: needsColumn(), values: test.kwargs.values });
    case 'relationships': {
      // `to` is written as `ref('customers')` or `source('s', 't')`: the last quoted word names the resource.
      const to = /['"]([^'"]+)['"]\s*\)\s*(\}\})?\s*$/.exec(String(test.kwargs.to ?? ''))?.[1];
      const target = [...datasets].find(([id]) => id.split('.').at(-1) === to)?.[1];
      if (!target || typeof test.kwargs.field !== 'string') throw new Skip(`the relationships test names ${String(test.kwargs.to)}, which is not imported`);
      const ref = quoteIdent(needsColumn());
      return rule('custom_sql', { condition: `${ref} is null or ${ref} in (select ${quoteIdent(test.kwargs.field)} from ${quoteIdent(target.name)})` });
    }
    default:
      throw new Skip(`the ${name} test has no matching rule type (not_null, unique, accepted_values and relationships are imported)`);
  }
}

async function importTests(
  deps: ImporterDeps,
  orgId: number,
  principal: Principal,
  audit: RequestAudit,
  tests: DbtTest[],
  datasets: Map<string, DatasetInfo>,
  previous: Map<string, number>,
  summary: ImportSummary,
  undo: Undo,
  skip: SkipFn,
): Promise<Map<string, number>> {
  const result = new Map<string, number>();
  for (const test of tests) {
    try {
      if (previous.has(test.uniqueId)) {
        result.set(test.uniqueId, previous.get(test.uniqueId)!); // a rule, once made, is the data-quality plugin's to change
        continue;
      }
      const dataset = test.attachedNode ? datasets.get(test.attachedNode) : undefined;
      if (!dataset) throw new Skip(`it tests ${test.attachedNode ?? 'nothing known'}, which is not imported`);
      const made = await deps.rules.create(orgId, principal, { dataset_id: dataset.id, ...ruleFor(test, datasets) }, audit);
      undo.rules.push(made.id);
      result.set(test.uniqueId, made.id);
      summary.rules_created++;
    } catch (err) {
      skip(test.uniqueId, err);
    }
  }
  return result;
}
