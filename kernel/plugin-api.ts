/**
 * The plugin contract: the only kernel module a plugin imports (with `route.ts` and `problem.ts`).
 * A plugin's entry module default-exports `definePlugin({...})`; its init asks for kernel services by
 * reference and gets them injected, and contributes routes and extension-point entries.
 */
import type { Maybe } from './maybe.ts';
import type { Logger } from 'pino';
import type { ZodType } from 'zod';
import type { PluginVisibleSettings } from './config.ts';
import type { RouteDefinition } from './route.ts';
import type { UserPrincipal } from './auth/principal.ts';
import type { PluginManifest } from './registry/manifest.ts';
import type { Migration, Storage } from '../storage/index.ts';
import type { AuditService } from './audit/audit-service.ts';
import type { IdentitySnapshot } from './identity/identity-snapshot.ts';
import type { GroupDirectory } from './identity/groups.ts';
import type { OrganizationDirectory } from './identity/organizations.ts';
import type { SessionService } from './identity/sessions.ts';
import type { PersonalAccessTokens } from './identity/tokens.ts';
import type { UserDirectory } from './identity/users.ts';
import type { Mailer } from './mail/mailer.ts';
import type { OutboundHttp } from './outbound.ts';
import type { Vault } from './vault.ts';
import type { RateLimits } from './rate-limit/rate-limits.ts';
import type { BackgroundWork } from './work/background-work.ts';
import type { DomainEvents } from './events/domain-events.ts';

/** A typed token naming a kernel service; the phantom member carries the service's type. */
export interface ServiceRef<T> {
  readonly id: string;
  readonly __service?: (value: T) => T;
}

function serviceRef<T>(id: string): ServiceRef<T> {
  return { id };
}

/** One loaded, failed or disabled plugin as the registry reports it. */
export interface PluginStatus {
  id: string;
  version: string | null;
  kind: string | null;
  state: 'loaded' | 'failed' | 'disabled';
  reason: string | null;
  /** The stable `KRN_ERR_…` code of `reason`. */
  reason_code: string | null;
  manifest_file: string;
  prefix: string | null;
  loaded_at: string | null;
  /** Set when the newest reload failed and the previous version kept serving. */
  last_reload_error: string | null;
}

/** What the registry lets a plugin (the `plugins` router) see and do. */
export interface PluginRegistryService {
  list(): PluginStatus[];
  get(id: string): PluginStatus | undefined;
  /** Re-reads the plugin's manifest and reloads it (and its dependents) without a restart. */
  reload(id: string): Promise<PluginStatus>;
  /**
   * The contributions to an extension point offered in an organization (null: in every one), as the
   * point's owner lists them (`ExtensionPointOwner.list`); empty while no loaded plugin provides the
   * point. The registry knows points by id only, never what their contributions are.
   */
  contributions(pointId: string, orgId: number | null): Promise<unknown[]>;
}

export const kernelServices = {
  /** The kernel's settings, without its secrets and credentials (SECRET_SETTINGS); a plugin's own settings are `ctx.config`. */
  config: serviceRef<Readonly<PluginVisibleSettings>>('kernel.config'),
  /** A logger whose lines carry the plugin id. */
  logger: serviceRef<Logger>('kernel.logger'),
  storage: serviceRef<Storage>('kernel.storage'),
  plugins: serviceRef<PluginRegistryService>('kernel.plugins'),
  /** The append-only audit log: record events, query them. */
  audit: serviceRef<AuditService>('kernel.audit'),
  mail: serviceRef<Mailer>('kernel.mail'),
  users: serviceRef<UserDirectory>('kernel.users'),
  organizations: serviceRef<OrganizationDirectory>('kernel.organizations'),
  groups: serviceRef<GroupDirectory>('kernel.groups'),
  tokens: serviceRef<PersonalAccessTokens>('kernel.tokens'),
  /** The caller's user, organizations and groups as of this request, without a query per read. */
  identity: serviceRef<IdentitySnapshot>('kernel.identity'),
  sessions: serviceRef<SessionService>('kernel.sessions'),
  /** Encrypts secrets at rest (connector passwords and tokens). */
  vault: serviceRef<Vault>('kernel.vault'),
  /** HTTP calls to the outside, refusing private, loopback and link-local targets unless allowed. */
  outbound: serviceRef<OutboundHttp>('kernel.outbound'),
  /** Capability names every loaded plugin defines, with their role baselines. */
  capabilities: serviceRef<CapabilityCatalog>('kernel.capabilities'),
  /** A principal's rate-limit budgets, in the RATE_LIMIT_STORE instances share. */
  rateLimits: serviceRef<RateLimits>('kernel.rate_limits'),
  /** Durable, leased work outside the request: the plugin's own kinds, enqueued, run on any instance, cancellable, periodic. */
  work: serviceRef<BackgroundWork>('kernel.work'),
  /** Domain events: published with the change they report, delivered after commit at least once, readable since an id. */
  events: serviceRef<DomainEvents>('kernel.events'),
  /** Which plugins serve which organization: extension-point owners offer a contribution only where its plugin is enabled. */
  pluginEnablement: serviceRef<PluginEnablementService>('kernel.plugin_enablement'),
  /** A user's rights of now, for work done for that user outside their requests (an API Service reads with its publisher's). */
  delegation: serviceRef<Delegation>('kernel.delegation'),
};

/** Acting for a user who is not the caller, with the rights that user holds now. */
export interface Delegation {
  /**
   * A principal (`via: 'delegated'`) holding the capabilities the user has in the organization now
   * (role baseline and groups), narrowed to `scopes` when given (a scoped token's, kept with a
   * StoredActor), so row policies and PII rules apply as to that user; or why the user may not act
   * there at all: removed, deactivated, or no longer a member.
   */
  actFor(userId: number, orgId: number, scopes?: readonly string[] | null): Maybe<UserPrincipal | { refused: string }>;
}

export interface CapabilityCatalog {
  list(): { name: string; description: string; roles: readonly string[]; scope: 'organization' | 'platform'; plugin_id: string }[];
  has(name: string): boolean;
  /** A platform-wide capability: granted by a role baseline only, never through a group. */
  isPlatformWide(name: string): boolean;
}

/** One organization's switch for one plugin. */
export interface OrganizationPluginSetting {
  plugin_id: string;
  org_id: number;
  /** Whether the plugin serves the organization (its org-scoped routes answer, its contributions are offered). */
  enabled: boolean;
  /** The manifest's `default_enabled`: what holds while the organization has not chosen. */
  default_enabled: boolean;
  /** A required plugin serves every organization. */
  required: boolean;
  /** When the organization last chose; null while the default holds. */
  updated_at: string | null;
}

/** Per-organization enablement of plugins; a change holds on every instance from its next request. */
export interface PluginEnablementService {
  /** Whether the plugin serves the organization. Awaitable; a value at once when already known. */
  isEnabled(pluginId: string, orgId: number): boolean | Promise<boolean>;
  /** The organization's switch for the plugin; 404 for an unknown plugin. */
  setting(pluginId: string, orgId: number): Promise<OrganizationPluginSetting>;
  /** Turns the plugin on or off for the organization; 404 for an unknown plugin, 409 to disable a required one. */
  set(pluginId: string, orgId: number, enabled: boolean, byUserId: number | null): Promise<OrganizationPluginSetting>;
}

export type ServiceType<R> = R extends ServiceRef<infer T> ? T : never;
export type ServiceRefs = Record<string, ServiceRef<any>>;

/** A named, typed place other plugins contribute to (e.g. connector types, recipe types). */
export interface ExtensionPoint<T> {
  readonly id: string;
  /** Every contribution (from code or a manifest's `contributes`) must match it, else its plugin fails to load. */
  readonly schema?: ZodType;
  /**
   * Names a contribution: a second one with the same key from another plugin is refused (its
   * plugin fails to load, naming the key and both plugins) and the first keeps serving.
   */
  readonly key?: (value: T) => string;
  /**
   * A top-level manifest field that contributes to this point (e.g. `recipe_types`): its entries
   * are contributions as if listed under `contributes[<id>]`, from a plugin depending on the owner.
   */
  readonly manifestKey?: string;
  readonly __contribution?: (value: T) => T;
}

/** An extension point without checks: the owner accepts whatever is contributed. */
export function extensionPoint<T>(id: string): ExtensionPoint<T> {
  return { id };
}

/** An extension point whose contributions the kernel checks (schema) and keeps unique (key) before its owner sees them. */
export function defineExtensionPoint<T>(point: { id: string; schema?: ZodType; key?: (value: T) => string; manifestKey?: string }): ExtensionPoint<T> {
  return point;
}

/** A typed name of a service one plugin offers the plugins that depend on it. */
export interface PluginServiceRef<T> {
  readonly id: string;
  readonly __service?: (value: T) => T;
}

export function pluginServiceRef<T>(id: string): PluginServiceRef<T> {
  return { id };
}

/** Undoes one registration when the plugin that made it is unloaded. */
export type Disposable = () => void | Promise<void>;

/** A contribution as its extension point's owner receives it. */
export interface Contribution<T> {
  value: T;
  /** Id of the contributing plugin. */
  pluginId: string;
  /** Absolute directory of the contributing plugin's entry module: what a manifest's module paths are relative to. */
  dir: string;
  /**
   * Imports a module of the contributing plugin by a path relative to `dir`, as this version of the
   * plugin sees it (a reload of the contributor imports its edited code, not Node's cached copy).
   */
  importModule(modulePath: string): Promise<Record<string, unknown>>;
}

/** What an extension point's owner adds to `accept`. */
export interface ExtensionPointOwner<T> {
  /**
   * Checks a manifest's contribution before the contributing plugin's migrations run (say, that a
   * handler it names imports): throwing refuses it and the plugin's schema stays untouched.
   * `accept` still checks it again when it is handed over.
   */
  check?(contribution: Contribution<T>): void | Promise<void>;
  /** The contributions offered in an organization (null: every one), as `PluginRegistryService.contributions` answers them. */
  list?(orgId: number | null): Promise<unknown[]>;
}

export interface PluginContext<C = undefined> {
  readonly pluginId: string;
  /** The plugin's own settings: the manifest's `config` section, checked against the definition's `config` schema. */
  readonly config: C;
  readonly manifest: Readonly<PluginManifest>;
  /** Absolute directory of the plugin's entry module. */
  readonly dir: string;
  /** Runs when this version of the plugin is unloaded (after its in-flight requests finished). */
  onDispose(dispose: Disposable): void;
  /**
   * Offers an extension point. `accept` is called for each contribution (from plugins that depend on
   * this one) and may return (or resolve to) a disposable that withdraws it; throwing (or
   * rejecting) refuses the contribution, and its plugin fails to load with
   * KRN_ERR_PLUGIN_CONTRIBUTION_INVALID. The disposable must withdraw exactly that contribution:
   * when a contributor reloads, its new version contributes before the old version's contribution
   * is withdrawn (the old one may still be serving requests).
   */
  provideExtensionPoint<T>(point: ExtensionPoint<T>, accept: (contribution: Contribution<T>) => Disposable | void | Promise<Disposable | void>, owner?: ExtensionPointOwner<T>): void;
  /**
   * Contributes to an extension point offered by a plugin this one depends on. The point's checks
   * (schema, key) run at once; its owner's `accept` may finish later: a refusal fails the load once
   * init returns.
   */
  contribute<T>(point: ExtensionPoint<T>, value: T): void;
  /**
   * Offers a service to the plugins that depend on this one. When this plugin reloads, its
   * dependents reload too and receive the new implementation.
   */
  provideService<T>(ref: PluginServiceRef<T>, implementation: T): void;
  /** A service offered by a plugin this one depends on (directly or not). */
  useService<T>(ref: PluginServiceRef<T>): T;
}

export interface PluginContributions {
  routes?: RouteDefinition<any>[];
}

const PLUGIN_BRAND = Symbol.for('platform.plugin-definition');

export interface PluginDefinition<D extends ServiceRefs = ServiceRefs, C = any> {
  readonly [PLUGIN_BRAND]: true;
  /** Kernel services the plugin needs, by reference. */
  deps: D;
  /**
   * The schema of the plugin's own settings, read from its manifest's `config` section before
   * init; a section that does not match fails the load naming the field (KRN_ERR_PLUGIN_CONFIG_INVALID).
   */
  config?: ZodType<C>;
  /** The plugin's own migrations (applied before init, namespaced by plugin id). */
  migrations?: Record<string, Migration>;
  init(services: { [K in keyof D]: ServiceType<D[K]> }, ctx: PluginContext<C>): Promise<PluginContributions | void> | PluginContributions | void;
}

export function definePlugin<D extends ServiceRefs, C = undefined>(definition: Omit<PluginDefinition<D, C>, typeof PLUGIN_BRAND>): PluginDefinition<D, C> {
  return { ...definition, [PLUGIN_BRAND]: true };
}

export function isPluginDefinition(value: unknown): value is PluginDefinition {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[PLUGIN_BRAND] === true;
}

/** The kernel's own zod: schemas a plugin declares are checked and described by the same instance. */
export { z } from 'zod';
export { defineRoute, reply, JsonText, type RouteDefinition, type StreamedMediaType } from './route.ts';
export { actingUser, actingUserId, storedActorOf, type StoredActor, type Principal, type UserPrincipal, type ApiKeyPrincipal, type RunPrincipal, type PrincipalKind } from './auth/principal.ts';
export { apiKeyAuthenticators, type ApiKeyAuthenticator, type ApiKeyGrant, type ApiKeyRequest } from './auth/api-keys.ts';
export type { RateBudget, RateLimits } from './rate-limit/rate-limits.ts';
export { fieldErrorsOf, HttpProblem, isHttpProblem, problemBody, problems, withFieldsRenamed, type FieldError } from './problem.ts';
export { beforeIdCursor, pageCursor } from './page-cursor.ts';
export { ChangeCountedCache } from './change-counted-cache.ts';
export { andThen, type Maybe } from './maybe.ts';
export type { AuditEvent, RequestAudit } from './audit/audit-service.ts';
export * as identitySchemas from './identity/schemas.ts';
export { toPublicUser, type UserRow, type PublicUser } from './identity/users.ts';
export { assertStrongPassword } from './identity/password-policy.ts';
export { randomPassword } from './auth/password.ts';
export { OutboundFailedError, OutboundRefusedError, type OutboundResponse } from './outbound.ts';
export type { BackgroundWork, EnqueueRequest, HandlerOptions } from './work/background-work.ts';
export { WorkAborted, type WorkContext } from './work/work-runner.ts';
export type { WorkItem, WorkProgress, WorkStatus, WorkEndReason } from './work/work-store.ts';
export type { DomainEvents, SubscribeOptions } from './events/domain-events.ts';
export type { PlatformEvent, NewEvent, EventQuery } from './events/event-store.ts';
export { checkOnce, compileParams, type ParamsCheck } from './json-schema.ts';
export { OfferedContributions } from './registry/offered-contributions.ts';
export { csvLines } from './csv.ts';
export { RELEASE } from './release.ts';
export { SECURITY_EVENT, type SecurityEventPayload } from './audit/security-events.ts';
export type { MailMessage } from './mail/mailer.ts';
export { escapeHtml } from './html.ts';
export { readFormFile, type FormFile } from './http/form-file.ts';
export { refuseUnfitJson } from './http/input-text.ts';
export { eventStream, type ServerSentEvent } from './http/event-stream.ts';
