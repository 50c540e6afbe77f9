/** A plugin could not be loaded; `code` is a stable `KRN_ERR_…` name, `message` the reason. */
export class PluginLoadError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

export const pluginErrors = {
  manifest: (reason: string) => new PluginLoadError('KRN_ERR_PLUGIN_MANIFEST', reason),
  duplicateId: (id: string, first: string, second: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_DUPLICATE_ID', `plugin id "${id}" is claimed by both ${first} and ${second}`),
  dependencyMissing: (id: string, dependency: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_DEPENDENCY_MISSING', `plugin "${id}" depends on "${dependency}", which is not loaded`),
  dependencyCycle: (ids: string[]) =>
    new PluginLoadError('KRN_ERR_PLUGIN_DEPENDENCY_CYCLE', `plugins depend on each other in a cycle: ${ids.join(' → ')}`),
  importFailed: (entry: string, reason: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_IMPORT', `entry ${entry} could not be imported: ${reason}`),
  notAPlugin: (entry: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_EXPORT', `entry ${entry} must default-export definePlugin({...})`),
  serviceUnknown: (id: string, names: string[]) =>
    new PluginLoadError('KRN_ERR_PLUGIN_SERVICE_UNKNOWN', `plugin "${id}" asks for unknown kernel services: ${names.join(', ')}`),
  initFailed: (id: string, reason: string) => new PluginLoadError('KRN_ERR_PLUGIN_INIT', `plugin "${id}" failed to initialise: ${reason}`),
  timeout: (id: string, ms: number) => new PluginLoadError('KRN_ERR_PLUGIN_TIMEOUT', `plugin "${id}" did not finish initialising within ${ms} ms`),
  migration: (id: string, reason: string) => new PluginLoadError('KRN_ERR_PLUGIN_MIGRATION', `plugin "${id}": ${reason}`),
  /** A reloaded version failed after its (additive) migrations committed: they stay, beside the version still serving. */
  additiveMigrationsKept: (error: PluginLoadError, migrations: string[]) =>
    new PluginLoadError(error.code, `${error.message}; its migrations ${migrations.join(', ')} only add to the schema and stay applied`),
  tableOutsidePrefix: (id: string, migrations: string[], tables: string[], prefix: string) =>
    new PluginLoadError(
      'KRN_ERR_PLUGIN_TABLE_PREFIX',
      `plugin "${id}": ${migrations.join(', ')} create${migrations.length > 1 ? '' : 's'} ${tables.join(', ')}, but a plugin's tables are named ${prefix} or ${prefix}_…; nothing was applied`,
    ),
  migrationNotAdditive: (id: string, migrations: string[], changes: string[]) =>
    new PluginLoadError(
      'KRN_ERR_PLUGIN_MIGRATION_NOT_ADDITIVE',
      `plugin "${id}": a hot reload applies only migrations that add to the schema, and ${migrations.join(', ')} ${changes.join('; ')}; nothing was applied and the running version keeps serving: restart the server to apply ${migrations.length > 1 ? 'them' : 'it'}`,
    ),
  routeConflict: (route: string, first: string, second: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_ROUTE_CONFLICT', `route ${route} is claimed by both plugin "${first}" and plugin "${second}"`),
  routeInvalid: (id: string, reason: string) => new PluginLoadError('KRN_ERR_PLUGIN_ROUTE_INVALID', `plugin "${id}": ${reason}`),
  capabilityConflict: (name: string, first: string, second: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_CAPABILITY_CONFLICT', `capability "${name}" is defined by both plugin "${first}" and plugin "${second}"`),
  extensionPointConflict: (point: string, first: string, second: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_EXTENSION_POINT_CONFLICT', `extension point "${point}" is provided by both plugin "${first}" and plugin "${second}"`),
  contributionInvalid: (id: string, point: string, reason: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_CONTRIBUTION_INVALID', `plugin "${id}" contributes to extension point "${point}" something it does not accept: ${reason}`),
  contributionDuplicate: (id: string, point: string, key: string, first: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_CONTRIBUTION_DUPLICATE', `plugin "${id}" contributes "${key}" to extension point "${point}", which plugin "${first}" already contributes`),
  configInvalid: (id: string, field: string, reason: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_CONFIG_INVALID', `plugin "${id}": its manifest's config.${field} ${reason}`),
  kernelVersion: (id: string, range: string, version: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_KERNEL_VERSION', `plugin "${id}" supports kernel versions ${range}; this kernel is ${version}`),
  extensionPointMissing: (id: string, point: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_EXTENSION_POINT_MISSING', `plugin "${id}" contributes to extension point "${point}", which none of the plugins it depends on provides`),
  manifestFieldUnknown: (id: string, field: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_MANIFEST_FIELD_UNKNOWN', `plugin "${id}": manifest field "${field}" is neither a manifest field nor the manifest key of an extension point provided by a plugin it depends on`),
  serviceConflict: (service: string, first: string, second: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_SERVICE_CONFLICT', `service "${service}" is provided by both plugin "${first}" and plugin "${second}"`),
  serviceMissing: (id: string, service: string) =>
    new PluginLoadError('KRN_ERR_PLUGIN_SERVICE_MISSING', `plugin "${id}" uses service "${service}", which none of the plugins it depends on provides`),
};
