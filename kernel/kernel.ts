import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { Migrator, openStorage, type Storage } from '../storage/index.ts';
import { AuditService } from './audit/audit-service.ts';
import { Authenticator } from './auth/authenticator.ts';
import { Authorizer } from './auth/authorizer.ts';
import { issueAccessToken, type JwtSettings } from './auth/jwt.ts';
import { Tenancy } from './auth/tenancy.ts';
import { bootstrapAdmin } from './bootstrap.ts';
import { pluginVisibleSettings, type Settings } from './config.ts';
import { createApp, createKernelServer, type InflightCounter, type KernelServer } from './http/app.ts';
import { createRouteCompiler } from './http/route-compiler.ts';
import { GroupDirectory } from './identity/groups.ts';
import { IdentitySnapshot } from './identity/identity-snapshot.ts';
import { OrganizationDirectory } from './identity/organizations.ts';
import { SessionService } from './identity/sessions.ts';
import { PersonalAccessTokens } from './identity/tokens.ts';
import { UserDirectory } from './identity/users.ts';
import { Mailer } from './mail/mailer.ts';
import { MemoryRateLimitStore } from './rate-limit/rate-limit-store.ts';
import { DatabaseRateLimitStore } from './rate-limit/database-rate-limit-store.ts';
import { RateLimits } from './rate-limit/rate-limits.ts';
import { ApiKeyAuthenticators, apiKeyAuthenticators } from './auth/api-keys.ts';
import { RunPrincipals } from './auth/run-principals.ts';
import { OutboundHttp } from './outbound.ts';
import { Vault } from './vault.ts';
import { EventDispatcher } from './events/event-dispatcher.ts';
import { EventStore } from './events/event-store.ts';
import { domainEventsFor } from './events/domain-events.ts';
import { backgroundWorkFor, type BackgroundWorkDeps } from './work/background-work.ts';
import { WorkRunner } from './work/work-runner.ts';
import type { RequestState } from './http/state.ts';
import { createLogger } from './logger.ts';
import { kernelMigrations } from './migrations/index.ts';
import { buildOpenApiDocument } from './openapi.ts';
import { kernelServices, type CapabilityCatalog, type Delegation, type ServiceRef } from './plugin-api.ts';
import { activeLifecycle, type ServiceLifecycle } from './registry/lifecycle.ts';
import { PluginEnablement } from './registry/enablement.ts';
import { PluginRegistry } from './registry/registry.ts';
import { resolveSecrets, type KernelSecrets } from './secrets.ts';
import type Koa from 'koa';

export const KERNEL_PLUGIN_ID = 'kernel';
/** How long requests whose statements were stopped at shutdown get to answer before connections close. */
const CANCELLED_ANSWER_GRACE_MS = 2_000;

export interface KernelOptions {
  settings: Settings;
  logger?: Logger;
  /** Where one-time console output (the bootstrap password) goes; stdout by default. */
  print?: (line: string) => void;
}

/** The running platform: storage, plugin registry and HTTP server, started and stopped as one. */
export class Kernel {
  readonly logger: Logger;
  readonly secrets: KernelSecrets;
  readonly storage: Storage;
  readonly migrator: Migrator;
  readonly registry: PluginRegistry;
  readonly app: Koa;
  readonly audit: AuditService;
  /** Principals of background runs, resolved (user, membership, capabilities) when a run starts. */
  readonly runPrincipals: RunPrincipals;
  readonly mailer: Mailer;
  readonly work: WorkRunner;
  readonly events: EventDispatcher;
  private readonly inflight: InflightCounter;
  /** What the kernel's own background work registered (its periodic pruning). */
  private readonly kernelDisposables: (() => void | Promise<void>)[] = [];
  private readonly jwt: JwtSettings;
  private server: KernelServer | undefined;

  constructor(private readonly options: KernelOptions) {
    const { settings } = options;
    this.logger = options.logger ?? createLogger(settings.LOG_LEVEL);
    this.secrets = resolveSecrets(settings);
    this.storage = openStorage(settings.DATABASE_URL, settings.DATA_DIR, {
      secretKey: this.secrets.vaultKey,
      readWorkers: settings.READ_WORKERS,
      readWorkersPerOrganization: settings.READ_WORKERS_PER_ORGANIZATION,
    });
    this.migrator = new Migrator(this.storage);
    this.jwt = { secret: this.secrets.jwtSecret, algorithm: settings.JWT_ALGORITHM, expireMinutes: settings.JWT_EXPIRE_MINUTES };

    this.audit = new AuditService(this.storage, this.logger, new EventStore(this.storage), KERNEL_PLUGIN_ID);
    this.mailer = new Mailer(this.storage, this.logger, settings.MAIL_FROM, settings.SMTP_URL);
    const users = new UserDirectory(this.storage);
    const organizations = new OrganizationDirectory(this.storage);
    const groups = new GroupDirectory(this.storage);
    const tokens = new PersonalAccessTokens(this.storage, this.secrets.patHashKey, settings.PAT_MAX_PER_USER);
    const identity = new IdentitySnapshot(this.storage, { users, organizations, groups, tokens });
    const sessions = new SessionService(users, this.jwt, {
      clientId: settings.IDP_CLIENT_ID,
      allowedDomains: settings.IDP_ALLOWED_DOMAINS,
      jwksUrl: settings.IDP_JWKS_URL,
      issuers: settings.IDP_ISSUERS,
    });
    const capabilities: CapabilityCatalog = {
      list: () => [...this.registry.current.capabilities.values()].map((c) => ({ name: c.name, description: c.description, roles: c.roles, scope: c.scope, plugin_id: c.pluginId })),
      has: (name) => this.registry.current.capabilities.has(name),
      isPlatformWide: (name) => this.registry.current.capabilities.get(name)?.scope === 'platform',
    };
    const rateLimitStore = settings.RATE_LIMIT_STORE === 'database' ? new DatabaseRateLimitStore(this.storage) : new MemoryRateLimitStore();
    const rateLimits = new RateLimits(rateLimitStore);
    this.runPrincipals = new RunPrincipals(identity, () => this.registry.current.capabilities);
    const delegation: Delegation = { actFor: (userId, orgId, scopes) => this.runPrincipals.actFor(userId, orgId, scopes) };
    const vault = new Vault(this.secrets.vaultKey);
    const outbound = new OutboundHttp(settings.OUTBOUND_ALLOWED_HOSTS, settings.OUTBOUND_TIMEOUT_MS);
    const enablement = new PluginEnablement(this.storage, (id) => this.registry.manifestOf(id));
    const apiKeys = new ApiKeyAuthenticators((pluginId, orgId) => enablement.isEnabled(pluginId, orgId));

    this.work = new WorkRunner(
      this.storage,
      { concurrency: settings.WORKER_CONCURRENCY, orgConcurrency: settings.WORKER_ORG_CONCURRENCY, pollMs: settings.WORKER_POLL_MS, leaseMs: settings.WORKER_LEASE_MS },
      {
        principalOf: (item) => (item.on_behalf_of === null ? Promise.resolve(null) : this.runPrincipals.forRun({ runId: item.id, orgId: item.org_id, userId: item.on_behalf_of, scopes: item.on_behalf_scopes })),
        auditFor: (principal, orgId) => (principal ? this.audit.forPrincipal(principal, orgId) : { record: (event) => this.audit.record({ orgId, ...event }, undefined) }),
      },
      this.logger.child({ component: 'background-work' }),
    );
    const workDeps: BackgroundWorkDeps = { storage: this.storage, runner: this.work, logger: this.logger, defaultTimeoutMs: settings.WORK_TIMEOUT_MS, drainTimeoutMs: settings.PLUGIN_DRAIN_TIMEOUT_MS };
    this.events = new EventDispatcher(this.storage, { pollMs: settings.EVENTS_POLL_MS, maxAttempts: settings.EVENTS_MAX_ATTEMPTS }, this.logger.child({ component: 'events' }));
    const eventStore = new EventStore(this.storage);

    const pluginSettings = pluginVisibleSettings(settings);
    const services: Record<string, (pluginId: string, lifecycle: ServiceLifecycle) => unknown> = {
      [kernelServices.config.id]: () => pluginSettings,
      [kernelServices.logger.id]: (pluginId) => this.logger.child({ plugin: pluginId }),
      [kernelServices.storage.id]: () => this.storage,
      [kernelServices.plugins.id]: () => this.registry,
      [kernelServices.audit.id]: () => this.audit,
      [kernelServices.mail.id]: () => this.mailer,
      [kernelServices.users.id]: () => users,
      [kernelServices.organizations.id]: () => organizations,
      [kernelServices.groups.id]: () => groups,
      [kernelServices.tokens.id]: () => tokens,
      [kernelServices.identity.id]: () => identity,
      [kernelServices.sessions.id]: () => sessions,
      [kernelServices.capabilities.id]: () => capabilities,
      [kernelServices.vault.id]: () => vault,
      [kernelServices.outbound.id]: () => outbound,
      [kernelServices.rateLimits.id]: () => rateLimits,
      [kernelServices.work.id]: (pluginId, lifecycle) => backgroundWorkFor(pluginId, workDeps, lifecycle),
      [kernelServices.events.id]: (pluginId, lifecycle) => domainEventsFor(pluginId, eventStore, this.events, this.storage.db, lifecycle),
      [kernelServices.pluginEnablement.id]: () => enablement,
      [kernelServices.delegation.id]: () => delegation,
    };
    const authorizer = new Authorizer({
      authenticator: new Authenticator(identity, this.jwt, tokens),
      tenancy: new Tenancy(identity, organizations, this.audit),
      identity,
      tokens,
      capabilities: () => this.registry.current.capabilities,
      apiKeys,
      rateLimits,
      patRateLimitPerMin: settings.PAT_RATE_LIMIT_PER_MIN,
      apiKeyRateLimitPerMin: settings.API_KEY_RATE_LIMIT_PER_MIN,
      requirePasswordChange: settings.REQUIRE_PASSWORD_CHANGE,
    });
    const compile = createRouteCompiler({
      authorizer,
      audit: this.audit,
      enablement,
      bodyLimit: settings.BODY_LIMIT,
      validateResponses: settings.VALIDATE_RESPONSES,
    });
    this.registry = new PluginRegistry({
      manifestDirs: settings.MANIFESTS_DIR,
      compile,
      drainTimeoutMs: settings.PLUGIN_DRAIN_TIMEOUT_MS,
      logger: this.logger,
      kernelPoints: [{ point: apiKeyAuthenticators, accept: apiKeys.accept }],
      loader: {
        logger: this.logger,
        migrator: this.migrator,
        initTimeoutMs: settings.PLUGIN_INIT_TIMEOUT_MS,
        resolveService: (ref: ServiceRef<unknown>, pluginId, lifecycle) => services[ref.id]?.(pluginId, lifecycle),
      },
    });
    const { app, inflight } = createApp({
      logger: this.logger,
      storage: this.storage,
      openapi: () => this.registry.current.openapi((routes) => buildOpenApiDocument(routes, settings.PUBLIC_URL)),
      dispatch: (ctx) => this.registry.current.dispatch(ctx as Koa.Context & { state: RequestState }),
      corsOrigins: settings.CORS_ALLOWED_ORIGINS,
      rateLimitStore,
      rateLimits: { authPerSecond: settings.AUTH_RATE_LIMIT_PER_SEC, apiPerSecond: settings.API_RATE_LIMIT_PER_SEC },
      trustProxy: settings.TRUST_PROXY,
    });
    this.app = app;
    this.inflight = inflight;
  }

  /** Migrates, bootstraps, loads every plugin and listens. Resolves once requests are served. */
  async start(): Promise<void> {
    const { settings } = this.options;
    await this.migrator.migrateUp([{ pluginId: KERNEL_PLUGIN_ID, migrations: kernelMigrations }]);
    await bootstrapAdmin(this.storage, settings, this.logger, this.options.print ?? ((line) => process.stdout.write(`${line}\n`)));
    await this.events.start();
    this.pruneEvents();
    await this.registry.start();
    // Claims start once every plugin is loaded: a run's principal takes its capabilities from the
    // plugins' manifests (a platform admin holds all of them), complete only then.
    await this.work.start();
    if (settings.PLUGIN_WATCH) this.registry.watch();
    const server = createKernelServer(this.app).listen(settings.PORT, settings.HOST);
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
  }

  /** Drops events older than EVENTS_RETENTION_DAYS, hourly, as background work that runs once across instances. */
  private pruneEvents() {
    const { settings } = this.options;
    const store = new EventStore(this.storage);
    const work = backgroundWorkFor(KERNEL_PLUGIN_ID, { storage: this.storage, runner: this.work, logger: this.logger, defaultTimeoutMs: settings.WORK_TIMEOUT_MS, drainTimeoutMs: 0 }, activeLifecycle(this.kernelDisposables));
    work.handle('events-prune', async () => ({ pruned: await store.prune(new Date(Date.now() - settings.EVENTS_RETENTION_DAYS * 86_400_000).toISOString()) }));
    work.every('events-prune', { cron: '17 * * * *' });
  }

  /** The base URL the server listens on. */
  get url(): string {
    const address = this.server?.address() as AddressInfo | null;
    if (!address) throw new Error('kernel is not listening');
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return `http://${host}:${address.port}`;
  }

  /** A JWT for a user, as login issues it. */
  issueToken(user: { id: number; role: string }): Promise<string> {
    return issueAccessToken(this.jwt, user);
  }

  /**
   * Graceful stop: refuse new connections, let requests in flight finish (up to
   * SHUTDOWN_TIMEOUT_MS), then stop the database statements still running (their requests fail and
   * their plugins can be disposed), dispose every plugin, close the database pool.
   */
  async stop(): Promise<void> {
    const server = this.server;
    this.inflight.draining = true;
    if (server) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await this.inflight.idle(this.options.settings.SHUTDOWN_TIMEOUT_MS);
      // What still runs waits on the database: its statements are stopped, so the requests answer
      // (a 503) in the moment that follows rather than lose their connection.
      await this.storage.cancelRunning();
      await this.inflight.idle(CANCELLED_ANSWER_GRACE_MS);
      server.closeAllConnections();
      await closed;
    }
    // Work still running is handed back to the queue for the next start (or another instance).
    await this.work.stop(this.options.settings.SHUTDOWN_TIMEOUT_MS);
    await this.events.stop();
    for (const dispose of this.kernelDisposables.splice(0)) await dispose();
    await this.registry.stop();
    this.mailer.close();
    await this.storage.close();
  }
}
