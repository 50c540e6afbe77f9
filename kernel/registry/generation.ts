import type { Context, Middleware } from 'koa';
import type { RouteDefinition } from '../route.ts';
import type { LoadedPlugin } from './loaded-plugin.ts';
import { pluginErrors, type PluginLoadError } from './plugin-errors.ts';
import { RouteTable } from './route-table.ts';

/** A route as served: its declaration, the plugin version that owns it and its full path. */
export interface MountedRoute {
  plugin: LoadedPlugin;
  route: RouteDefinition<any>;
  /** Full OpenAPI-style path, e.g. `/api/plugins/{id}/reload`. */
  path: string;
  tag: string;
}

export interface CapabilityInfo {
  name: string;
  description: string;
  roles: readonly string[];
  scope: 'organization' | 'platform';
  pluginId: string;
}

/** Turns a mounted route into the Koa middleware that serves it (auth, validation, handler). */
export type RouteCompiler = (mounted: MountedRoute) => Middleware;

const routeKey = (method: string, path: string) => `${method.toUpperCase()} ${path.replace(/\{[^}]+\}/g, '{}')}`;

export function mountedRoutes(plugin: LoadedPlugin): MountedRoute[] {
  const router = plugin.manifest.router;
  if (!router) return [];
  return plugin.routes.map((route) => ({ plugin, route, path: `${route.page ? router.pages : router.prefix}${route.path}`, tag: router.tag }));
}

/** A route that would shadow another, a capability defined twice or a malformed route: the first problem found. */
export function findConflict(candidate: LoadedPlugin, others: Iterable<LoadedPlugin>): PluginLoadError | null {
  if (candidate.routes.length > 0 && !candidate.manifest.router) {
    return pluginErrors.routeInvalid(candidate.id, 'contributes routes but its manifest declares no router prefix');
  }
  if (candidate.routes.some((route) => route.page) && !candidate.manifest.router?.pages) {
    return pluginErrors.routeInvalid(candidate.id, 'contributes pages but its manifest declares no router.pages prefix');
  }
  const taken = new Map<string, string>();
  const capabilities = new Map<string, string>();
  for (const other of others) {
    if (other.id === candidate.id) continue;
    for (const m of mountedRoutes(other)) taken.set(routeKey(m.route.method, m.path), other.id);
    for (const c of other.manifest.capabilities) capabilities.set(c.name, other.id);
  }
  const own = new Set<string>();
  for (const m of mountedRoutes(candidate)) {
    if (m.route.path !== '' && !m.route.path.startsWith('/')) return pluginErrors.routeInvalid(candidate.id, `route path "${m.route.path}" must start with /`);
    const declared = Object.keys(m.route.request?.params?.shape ?? {});
    const inPath = [...m.path.matchAll(/\{([^}]+)\}/g)].map((x) => x[1]);
    const undeclared = inPath.filter((p) => !declared.includes(p));
    if (undeclared.length) return pluginErrors.routeInvalid(candidate.id, `route ${m.route.method.toUpperCase()} ${m.path} has path parameters without a params schema: ${undeclared.join(', ')}`);
    const key = routeKey(m.route.method, m.path);
    if (own.has(key)) return pluginErrors.routeConflict(key, candidate.id, candidate.id);
    own.add(key);
    const owner = taken.get(key);
    if (owner) return pluginErrors.routeConflict(`${m.route.method.toUpperCase()} ${m.path}`, owner, candidate.id);
  }
  for (const c of candidate.manifest.capabilities) {
    const owner = capabilities.get(c.name);
    if (owner) return pluginErrors.capabilityConflict(c.name, owner, candidate.id);
  }
  return null;
}

/**
 * An immutable set of loaded plugin versions and the router built from them. Hot reload builds a
 * new generation and swaps the one reference the dispatcher reads; requests already routed keep
 * the generation (and plugin versions) that took them.
 */
export class Generation {
  readonly routes: MountedRoute[];
  readonly capabilities: Map<string, CapabilityInfo>;
  private readonly table: RouteTable;
  private openapiCache: Record<string, unknown> | undefined;

  constructor(
    readonly id: number,
    readonly plugins: ReadonlyMap<string, LoadedPlugin>,
    compile: RouteCompiler,
  ) {
    this.routes = [...plugins.values()].flatMap(mountedRoutes).sort((a, b) => a.path.localeCompare(b.path) || a.route.method.localeCompare(b.route.method));
    this.table = new RouteTable(this.routes.map((mounted) => ({ path: mounted.path, method: mounted.route.method, serve: compile(mounted) })));
    this.capabilities = new Map(
      [...plugins.values()].flatMap((p) => p.manifest.capabilities.map((c) => [c.name, { ...c, pluginId: p.id }] as const)),
    );
  }

  /** Serves a request from this generation; an unknown path is 404, a known path with another method 405. */
  dispatch(ctx: Context): Promise<void> {
    return this.table.dispatch(ctx);
  }

  /** The OpenAPI document of this generation, built once on first use. */
  openapi(build: (routes: MountedRoute[]) => Record<string, unknown>): Record<string, unknown> {
    this.openapiCache ??= build(this.routes);
    return this.openapiCache;
  }
}
