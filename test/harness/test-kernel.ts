import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadSettings } from '../../kernel/config.ts';
import { Kernel } from '../../kernel/kernel.ts';
import { hashPassword } from '../../kernel/auth/password.ts';
import { createLogger } from '../../kernel/logger.ts';
import { AnswerChecker } from './answer-check.ts';
import type { DialectName } from './dialects.ts';
import { createScratchDatabase, tempDir } from './scratch-database.ts';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const FIXTURE_PLUGINS = path.join(REPO_ROOT, 'test/fixtures/plugins');

export interface TestKernelOptions {
  dialect: DialectName;
  /** Manifest folders; defaults to the repository's `manifests/`. */
  manifestDirs?: string[];
  /** Extra settings (environment variables). */
  env?: Record<string, string>;
  /** Collects every log line (level trace) here instead of discarding the log. */
  logLines?: string[];
}

export interface TestResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  token?: string | null;
  body?: unknown;
  headers?: Record<string, string>;
}

/**
 * A real kernel on a loopback port over a scratch database, with an admin token at hand. Every
 * test talks to it over HTTP, the way a client would.
 */
export interface TestKernel {
  kernel: Kernel;
  url: string;
  dataDir: string;
  adminToken: string;
  request<T = any>(method: string, path: string, options?: RequestOptions): Promise<TestResponse<T>>;
  /** Creates a user with a legacy role (and membership of org 1) and returns a JWT for it. */
  userToken(role: string, username?: string): Promise<{ id: number; token: string }>;
  /** An editor whose default organization is a new one of their own, created through the API: the other tenant. */
  outsider(username: string): Promise<{ orgId: number; userId: number; token: string }>;
  /** A second kernel over the same database, as a second instance behind a load balancer; stopped with this one. */
  peer(): Promise<{ url: string; request: TestKernel['request'] }>;
  stop(): Promise<void>;
}

type Requester = TestKernel['request'];

/** OPENAPI_ANSWER_CHECK=off skips checking answers against the document (on by default). */
const CHECK_ANSWERS = process.env.OPENAPI_ANSWER_CHECK !== 'off';

/**
 * The checker of a kernel's answers, over the document it serves, fetched before the first request
 * (a test may stop the kernel while that request runs). A path no operation matches fetches it
 * again, once per path: a plugin loaded since may serve it; a kernel gone by then keeps the old one.
 */
function answerChecker(url: string) {
  let checker: Promise<AnswerChecker> | undefined;
  const missed = new Set<string>();
  const load = () => fetch(`${url}/openapi.json`).then(async (res) => new AnswerChecker(await res.json()));
  return {
    ready: () => (checker ??= load()),
    async check(method: string, route: string, response: Response, body: unknown, text: string) {
      let current = await (checker ??= load());
      const path = new URL(route, url).pathname;
      const problemOf = (document: AnswerChecker) => document.problem(method, route, response.status, response.headers.get('content-type'), body, text);
      let problem = problemOf(current);
      if (problem === undefined && path.startsWith('/api/') && !missed.has(path) && !current.matches(method, route)) {
        missed.add(path);
        const reloaded = load();
        const fresh = await reloaded.catch(() => undefined);
        if (fresh) {
          checker = reloaded;
          current = fresh;
          problem = problemOf(current);
        }
      }
      if (problem) throw new Error(`the answer disagrees with /openapi.json: ${problem}`);
    },
  };
}

/**
 * Requests to `url` as a client would send them, with `defaultToken` unless the call names another
 * (or null). Every answer is checked against the kernel's OpenAPI document: every suite doubles as
 * the test that the document describes the real answers.
 */
function requester(url: string, defaultToken: string): Requester {
  const check = CHECK_ANSWERS ? answerChecker(url) : undefined;
  return async <T>(method: string, route: string, opts: RequestOptions = {}): Promise<TestResponse<T>> => {
    const headers: Record<string, string> = { ...opts.headers };
    const token = opts.token === undefined ? defaultToken : opts.token;
    if (token) headers.authorization ??= `Bearer ${token}`;
    let body: string | Uint8Array<ArrayBuffer> | undefined;
    if (opts.body !== undefined) {
      // Text and bytes (an image, a file) go as they are; anything else as JSON.
      body = typeof opts.body === 'string' ? opts.body : opts.body instanceof Uint8Array ? new Uint8Array(opts.body) : JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    await check?.ready();
    const response = await fetch(`${url}${route}`, { method, headers, body });
    const text = await response.text();
    let parsed: unknown = text;
    if (/json/.test(response.headers.get('content-type') ?? '') && text) parsed = JSON.parse(text);
    await check?.check(method, route, response, parsed, text);
    return { status: response.status, headers: response.headers, body: parsed as T, text };
  };
}

export async function startTestKernel(options: TestKernelOptions): Promise<TestKernel> {
  const temp = tempDir();
  const database = await createScratchDatabase(options.dialect, temp.dir);
  const settings = loadSettings({
    NODE_ENV: 'test',
    PORT: '0',
    DATA_DIR: temp.dir,
    DATABASE_URL: database.url,
    MANIFESTS_DIR: (options.manifestDirs ?? [path.join(REPO_ROOT, 'manifests')]).join(path.delimiter),
    PLUGIN_WATCH: 'false',
    ADMIN_PASSWORD: 'admin-password-1',
    // Suites that test the limits turn them on; everything else would trip over them.
    AUTH_RATE_LIMIT_PER_SEC: '0',
    API_RATE_LIMIT_PER_SEC: '0',
    ...options.env,
  });
  const logLines = options.logLines;
  const logger = logLines ? createLogger('trace', { write: (line: string) => void logLines.push(line) }) : createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
  const kernel = new Kernel({ settings, logger, print: () => undefined });
  const peers: Kernel[] = [];
  try {
    await kernel.start();
  } catch (err) {
    await kernel.stop().catch(() => undefined);
    await database.drop();
    temp.remove();
    throw err;
  }
  const url = kernel.url;
  const admin = await kernel.storage.db.selectFrom('users').select(['id', 'role']).orderBy('id').executeTakeFirstOrThrow();
  const adminToken = await kernel.issueToken(admin);

  const request = requester(url, adminToken);

  let userCounter = 0;
  const userToken = async (role: string, username = `${role}-${++userCounter}`) => {
    const now = kernel.storage.now();
    const user = await kernel.storage.db
      .insertInto('users')
      .values({ username, email: `${username}@example.test`, password_hash: await hashPassword('user-password-1'), role, default_org_id: 1, must_reset_password: false, is_active: true, created_at: now, updated_at: now })
      .returning('id')
      .executeTakeFirstOrThrow();
    await kernel.storage.db.insertInto('organization_members').values({ org_id: 1, user_id: user.id, created_at: now }).execute();
    return { id: user.id, token: await kernel.issueToken({ id: user.id, role }) };
  };

  const outsider = async (username: string) => {
    const org = await request<{ id: number }>('POST', '/api/organizations', { body: { name: `${username}'s organization` } });
    const user = await request<{ id: number }>('POST', '/api/users', {
      body: { username, email: `${username}@example.test`, role: 'editor', password: 'Quiet-harbour-77', default_org_id: org.body.id },
    });
    if (org.status !== 201 || user.status !== 201) throw new Error(`could not create the outsider ${username}: ${org.text} ${user.text}`);
    return { orgId: org.body.id, userId: user.body.id, token: await kernel.issueToken({ id: user.body.id, role: 'editor' }) };
  };

  return {
    kernel,
    url,
    dataDir: temp.dir,
    adminToken,
    request,
    userToken,
    outsider,
    async peer() {
      const peer = new Kernel({ settings, logger: createLogger('silent'), print: () => undefined });
      peers.push(peer);
      await peer.start();
      return { url: peer.url, request: requester(peer.url, adminToken) };
    },
    async stop() {
      for (const peer of peers) await peer.stop();
      await kernel.stop();
      await database.drop();
      temp.remove();
    },
  };
}

/** Writes a manifest JSON into `dir`, pointing `entry` at a fixture plugin folder's index.ts. */
export function writeManifest(dir: string, manifest: Record<string, unknown> & { id: string }, fixture?: string): string {
  const file = path.join(dir, `${manifest.id}.json`);
  const entry = fixture ? path.relative(dir, path.join(FIXTURE_PLUGINS, fixture, 'index.ts')) : manifest.entry;
  fs.writeFileSync(file, JSON.stringify({ version: '1.0.0', kind: 'router', ...manifest, entry }, null, 2));
  return file;
}
