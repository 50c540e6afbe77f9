import path from 'node:path';
import { z } from 'zod';
import { isSupportedDatabaseUrl, LONG_READ_DEFAULTS } from '../storage/index.ts';

const integer = (fallback: number, min = 0) => z.coerce.number().int().min(min).default(fallback);
const list = (fallback = '') =>
  z
    .string()
    .default(fallback)
    .transform((value) => value.split(',').map((item) => item.trim()).filter(Boolean));
const bool = (fallback: boolean) =>
  z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default(fallback ? 'true' : 'false')
    .transform((v) => v === 'true' || v === '1' || v === 'yes');
const optionalSecret = z.string().min(32, 'must be at least 32 characters').optional();

/**
 * Every setting, read from the environment (and `.env`). The README's settings table mirrors this
 * schema; a setting added here belongs there too.
 */
export const settingsSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(8000),
  HOST: z.string().min(1).default('127.0.0.1'),
  PUBLIC_URL: z.url().optional(),
  DATABASE_URL: z
    .string()
    .optional()
    .refine((v) => v === undefined || v === '' || isSupportedDatabaseUrl(v), 'must be sqlite:PATH or postgres://…')
    .transform((v) => v || undefined),
  DATA_DIR: z.string().min(1).default('./data'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  MANIFESTS_DIR: z
    .string()
    .default('./manifests')
    .transform((v) => v.split(path.delimiter).map((d) => d.trim()).filter(Boolean)),
  PLUGIN_WATCH: bool(true),
  PLUGIN_INIT_TIMEOUT_MS: integer(10_000, 1),
  PLUGIN_DRAIN_TIMEOUT_MS: integer(30_000, 0),
  SHUTDOWN_TIMEOUT_MS: integer(10_000, 0),
  /** Background work items this process runs at once; 0 = this instance runs none (it only enqueues). */
  WORKER_CONCURRENCY: integer(4, 0),
  /** Background work items of one organization running at once, across instances. */
  WORKER_ORG_CONCURRENCY: integer(2, 1),
  WORKER_POLL_MS: integer(1_000, 10),
  WORKER_LEASE_MS: integer(30_000, 300),
  WORK_TIMEOUT_MS: integer(60 * 60_000, 1),
  // The longest one recipe run may take (its SQL statement, or its handler in a worker thread).
  RECIPE_TIMEOUT_S: integer(60 * 60, 1),
  EVENTS_POLL_MS: integer(1_000, 10),
  EVENTS_MAX_ATTEMPTS: integer(10, 1),
  EVENTS_RETENTION_DAYS: integer(7, 1),
  BODY_LIMIT: z.string().regex(/^\d+(b|kb|mb|gb)$/i, 'must be a size such as 1mb or 512kb').default('1mb'),
  DATASET_UPLOAD_LIMIT: z.string().regex(/^\d+(b|kb|mb|gb|tb)$/i, 'must be a size such as 2gb or 500mb').default('2gb'),
  /** Largest dbt manifest (with its catalog) one import may send, JSON body or multipart form. */
  DBT_MANIFEST_LIMIT: z.string().regex(/^\d+(b|kb|mb|gb)$/i, 'must be a size such as 50mb or 512kb').default('50mb'),
  /** Largest ONNX model one import may send (`POST /api/registry/models/{id}/versions`): it is held in memory to load it. */
  REGISTRY_ONNX_LIMIT: z.string().regex(/^\d+(b|kb|mb|gb)$/i, 'must be a size such as 100mb or 512kb').default('100mb'),
  /** The largest document a knowledge upload takes. */
  KNOWLEDGE_UPLOAD_LIMIT: z.string().regex(/^\d+(b|kb|mb|gb)$/i, 'must be a size such as 20mb or 512kb').default('20mb'),
  /** Largest field of an uploaded CSV, checked while it streams (the parser holds a whole record in memory). */
  CSV_MAX_FIELD_BYTES: integer(1024 * 1024, 1),
  CSV_MAX_RECORD_BYTES: integer(4 * 1024 * 1024, 1),
  /** Default: on, except with NODE_ENV=production. */
  VALIDATE_RESPONSES: z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .optional()
    .transform((v) => (v === undefined ? undefined : v === 'true' || v === '1' || v === 'yes')),
  JWT_SECRET: optionalSecret,
  JWT_ALGORITHM: z.enum(['HS256', 'HS384', 'HS512']).default('HS256'),
  JWT_EXPIRE_MINUTES: integer(60, 1),
  PAT_HASH_KEY: optionalSecret,
  VAULT_KEY: optionalSecret,
  /** Bytes of values one governed SQL result may carry; past it the result is truncated. */
  SQL_MAX_RESULT_BYTES: integer(16 * 1024 * 1024, 1024),
  OUTBOUND_ALLOWED_HOSTS: list(),
  OUTBOUND_TIMEOUT_MS: integer(10_000, 1),
  DATA_QUALITY_TIMEOUT_MS: z.coerce.number().int().min(1).max(300_000).default(30_000),
  /** Long reads (profiles, exports, pages of rows, quality runs) running at once: SQLite's read threads, Postgres connections. */
  READ_WORKERS: integer(LONG_READ_DEFAULTS.workers, 1),
  READ_WORKERS_PER_ORGANIZATION: integer(LONG_READ_DEFAULTS.perOrganization, 1),
  PAT_MAX_PER_USER: integer(20, 1),
  PAT_RATE_LIMIT_PER_MIN: integer(0),
  API_KEY_RATE_LIMIT_PER_MIN: integer(0),
  /** How often each instance adds the API Service usage it counted to the database: a crash loses at most this much of it. */
  API_USAGE_FLUSH_MS: integer(5_000, 10),
  /** Days of API Service usage kept; older minutes are deleted (0 keeps them all). */
  API_USAGE_RETENTION_DAYS: integer(90),
  /** How long the query of an API Service's `sql` endpoint may run before the call is a 504 (at most POST /api/sql's longest, 5 minutes). */
  API_SERVICE_SQL_TIMEOUT_MS: integer(30_000, 1).pipe(z.number().max(300_000)),
  /**
   * The first retry delay of a webhook delivery: the n-th retry waits a random time up to
   * base × 2^(n-1) (full jitter), at most an hour, until 24 hours after the event.
   */
  WEBHOOK_RETRY_BASE_MS: integer(10_000, 1),
  /** When the notifications look for tokens and data API keys about to expire (croner: 5 fields, or 6 with seconds). */
  NOTIFY_EXPIRY_CHECK_CRON: z.string().min(9).max(100).default('7 * * * *'),
  /** How long an LLM provider may go without sending a byte (a whole answer, or the next piece of a stream) before the call fails. */
  LLM_IDLE_TIMEOUT_MS: integer(120_000, 100),
  /** How long a model call over its connection's rate limit waits for room before it is answered 429. */
  LLM_RATE_LIMIT_WAIT_MS: integer(2_000, 0),
  /** How many rounds of tool calls one chat message may take before the model must answer in words. */
  CHAT_MAX_TOOL_STEPS: integer(5, 0),
  /** Where rate-limit counters live; default: `database` on Postgres (instances share them), `memory` on SQLite. */
  RATE_LIMIT_STORE: z.enum(['memory', 'database']).optional(),
  CORS_ALLOWED_ORIGINS: list(),
  IDP_CLIENT_ID: z.string().optional(),
  IDP_ALLOWED_DOMAINS: list(),
  IDP_JWKS_URL: z.url().default('https://www.googleapis.com/oauth2/v3/certs'),
  IDP_ISSUERS: list('https://accounts.google.com,accounts.google.com'),
  TRUST_PROXY: bool(false),
  AUTH_RATE_LIMIT_PER_SEC: integer(5),
  API_RATE_LIMIT_PER_SEC: integer(100),
  RESET_TOKEN_TTL_MINUTES: integer(60, 1),
  /** A user with `must_reset_password` may only change the password, read /api/me and revoke a token until they do. */
  REQUIRE_PASSWORD_CHANGE: bool(false),
  SMTP_URL: z
    .string()
    .regex(/^smtps?:\/\//, 'must be an smtp:// or smtps:// URL')
    .optional(),
  MAIL_FROM: z.string().min(3).default('Data Platform <no-reply@localhost.localdomain>'),
  ADMIN_USERNAME: z.string().min(1).default('admin'),
  ADMIN_PASSWORD: z.string().min(8, 'must be at least 8 characters').optional(),
  ADMIN_EMAIL: z.email().default('admin@localhost.localdomain'),
});

export type Settings = Omit<z.infer<typeof settingsSchema>, 'VALIDATE_RESPONSES' | 'RATE_LIMIT_STORE'> & { VALIDATE_RESPONSES: boolean; RATE_LIMIT_STORE: 'memory' | 'database' };

/** Secrets, and settings that may carry a password: the kernel keeps them; no plugin is given them. */
export const SECRET_SETTINGS = ['JWT_SECRET', 'PAT_HASH_KEY', 'VAULT_KEY', 'ADMIN_PASSWORD', 'DATABASE_URL', 'SMTP_URL'] as const;
export type PluginVisibleSettings = Omit<Settings, (typeof SECRET_SETTINGS)[number]>;

/** The settings a plugin sees through the `config` service. */
export function pluginVisibleSettings(settings: Settings): Readonly<PluginVisibleSettings> {
  const visible: Record<string, unknown> = { ...settings };
  for (const name of SECRET_SETTINGS) delete visible[name];
  return Object.freeze(visible as PluginVisibleSettings);
}

/** A setting failed validation; `message` is the one line printed before the process stops. */
export class SettingsError extends Error {}

/** Validates the environment into settings; the first bad variable is named in the error. */
export function loadSettings(env: Record<string, string | undefined>): Settings {
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = settingsSchema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const variable = String(issue.path[0] ?? 'environment');
    throw new SettingsError(`invalid setting ${variable}: ${issue.message}`);
  }
  const settings: Settings = {
    ...parsed.data,
    VALIDATE_RESPONSES: parsed.data.VALIDATE_RESPONSES ?? parsed.data.NODE_ENV !== 'production',
    // Several instances can share a Postgres, never a SQLite file: only there must counters be shared by default.
    RATE_LIMIT_STORE: parsed.data.RATE_LIMIT_STORE ?? (parsed.data.DATABASE_URL?.startsWith('postgres') ? 'database' : 'memory'),
  };
  if (settings.NODE_ENV === 'production') {
    for (const secret of ['JWT_SECRET', 'PAT_HASH_KEY', 'VAULT_KEY'] as const) {
      if (!settings[secret]) throw new SettingsError(`invalid setting ${secret}: required when NODE_ENV=production`);
    }
  }
  return settings;
}
