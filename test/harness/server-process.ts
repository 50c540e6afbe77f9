import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import Database from 'better-sqlite3';
import { SignJWT } from 'jose';
import pg from 'pg';
import type { DialectName } from './dialects.ts';
import { REPO_ROOT } from './test-kernel.ts';

/**
 * Servers as real processes, for tests that kill one (SIGKILL) and start another on the same
 * database: what a crash leaves is what the next process finds.
 */

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A `tsx kernel/main.ts` process of its own process group (killed whole with SIGKILL). */
export interface ServerProcess {
  url: string;
  proc: ChildProcess;
  output(): string;
  gone: Promise<void>;
}

/**
 * The settings of server processes over `databaseUrl` (data in `dir`), with short leases (2 s) so
 * that a killed process's work is taken over soon, and a token for the first admin (user 1).
 */
export async function serverSettings(dir: string, databaseUrl: string, manifestDirs: string[]): Promise<{ env: Record<string, string>; token: string }> {
  const secret = crypto.randomBytes(48).toString('base64url');
  const env = {
    DATA_DIR: path.join(dir, 'data'),
    DATABASE_URL: databaseUrl,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'error',
    PLUGIN_WATCH: 'false',
    JWT_SECRET: secret,
    ADMIN_PASSWORD: 'admin-password-1',
    MANIFESTS_DIR: manifestDirs.join(path.delimiter),
    WORKER_LEASE_MS: '2000',
    WORKER_POLL_MS: '200',
    AUTH_RATE_LIMIT_PER_SEC: '0',
    API_RATE_LIMIT_PER_SEC: '0',
  };
  const token = await new SignJWT({ user_id: 1, role: 'admin' }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).setIssuedAt().setExpirationTime('1h').sign(new TextEncoder().encode(secret));
  return { env, token };
}

async function unusedPort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** Starts a server process with `env` (added to `live`, for the suite to kill at its end) and waits until it listens. */
export async function launch(env: Record<string, string>, live: ServerProcess[]): Promise<ServerProcess> {
  const env2 = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', PORT: String(await unusedPort()), ...env };
  const proc = spawn(path.join(REPO_ROOT, 'node_modules/.bin/tsx'), ['kernel/main.ts'], { cwd: REPO_ROOT, env: env2, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let text = '';
  proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  let ended = false;
  const gone = new Promise<void>((resolve) => proc.once('close', () => resolve())).then(() => void (ended = true));
  const server: ServerProcess = { url: '', proc, output: () => text, gone };
  live.push(server);
  const started = Date.now();
  for (;;) {
    const listening = /listening on (http:\/\/\S+)/.exec(text);
    if (listening) return { ...server, url: listening[1] };
    if (ended || Date.now() - started > 40_000) throw new Error(`the server did not start:\n${text}`);
    await sleep(50);
  }
}

/** Whether the server process has ended (killed, or it stopped). */
export const exited = (server: ServerProcess) => server.proc.exitCode !== null || server.proc.signalCode !== null;

/** SIGKILL to the server's whole process group (tsx, the server, its governed SQL processes). */
export async function killHard(server: ServerProcess): Promise<void> {
  process.kill(-server.proc.pid!, 'SIGKILL');
  await server.gone;
}

/** Kills every server of `live` still running (a suite's end). */
export async function killAll(live: ServerProcess[]): Promise<void> {
  for (const server of live) if (!exited(server)) await killHard(server).catch(() => undefined);
}

export type Answer = { status: number; body: any };

/** Requests to a server process as `token`, answered with their status and (JSON) body. */
export function client(url: string, token: string) {
  return async (method: string, route: string, body?: unknown, contentType = 'application/json'): Promise<Answer> => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers['content-type'] = contentType;
    const res = await fetch(`${url}${route}`, { method, headers, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
    const text = await res.text();
    return { status: res.status, body: /json/.test(res.headers.get('content-type') ?? '') && text ? JSON.parse(text) : text };
  };
}

/**
 * Statements on the database itself (`$1`-style parameters), while no server runs or beside one:
 * no API in between. Read-only unless `write` (a test setting up what a crash long ago left).
 */
export function databaseQuery(dialect: DialectName, url: string, { write = false } = {}) {
  return async <T>(text: string, params: unknown[] = []): Promise<T[]> => {
    if (dialect === 'sqlite') {
      const db = new Database(url.replace(/^sqlite:/, ''), { readonly: !write, fileMustExist: true });
      try {
        const statement = db.prepare(text.replace(/\$\d+/g, '?'));
        return (statement.reader ? statement.all(...params) : (statement.run(...params), [])) as T[];
      } finally {
        db.close();
      }
    }
    const pgClient = new pg.Client({ connectionString: url });
    await pgClient.connect();
    try {
      return (await pgClient.query(text, params)).rows as T[];
    } finally {
      await pgClient.end();
    }
  };
}
