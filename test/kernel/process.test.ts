import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import Database from 'better-sqlite3';
import { SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { verifyPassword } from '../../kernel/auth/password.ts';
import { REPO_ROOT, tempDir, writeManifest } from '../harness/index.ts';

const TSX = path.join(REPO_ROOT, 'node_modules/.bin/tsx');
const START_TIMEOUT_MS = 30_000;
const EXIT_TIMEOUT_MS = 15_000;

interface ServerProcess {
  proc: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (or the signal that ended it). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited: () => boolean;
}

const children: ServerProcess[] = [];
const temps: { remove(): void }[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (!child.hasExited()) {
      // tsx runs the server in a child of its own: end the whole process group we started
      try {
        process.kill(-child.proc.pid!, 'SIGKILL');
      } catch {
        child.proc.kill('SIGKILL');
      }
      await withTimeout(child.exited, 5_000, 'killed child to exit').catch(() => undefined);
    }
  }
  for (const temp of temps.splice(0)) temp.remove();
});

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    }),
  ]);
}

/** A loopback port nobody listens on right now. */
async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => server.listen(0, '127.0.0.1', resolve).once('error', reject));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function newTemp(prefix: string) {
  const temp = tempDir(prefix);
  temps.push(temp);
  return temp.dir;
}

/** Starts `tsx kernel/main.ts` (or `command`) with exactly the given environment (plus PATH and HOME). */
function startServer(env: Record<string, string>, command: string[] = [TSX, 'kernel/main.ts']): ServerProcess {
  const proc = spawn(command[0], command.slice(1), {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let stdout = '';
  let stderr = '';
  let done = false;
  proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once('close', (code, signal) => {
      done = true;
      resolve({ code, signal });
    }),
  );
  const child = { proc, stdout: () => stdout, stderr: () => stderr, exited, hasExited: () => done };
  children.push(child);
  return child;
}

/** Waits until stdout matches, failing early (with the output) when the process exits first. */
async function waitForStdout(child: ServerProcess, pattern: RegExp, timeoutMs = START_TIMEOUT_MS): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const match = pattern.exec(child.stdout());
    if (match) return match;
    if (child.hasExited()) throw new Error(`server exited before printing ${pattern}\nstdout: ${child.stdout()}\nstderr: ${child.stderr()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${pattern}\nstdout: ${child.stdout()}\nstderr: ${child.stderr()}`);
}

const LISTENING = /listening on (http:\/\/\S+) .*API docs at (http:\/\/\S+\/docs)\b/;

async function adminToken(secret: string, alg = 'HS256'): Promise<string> {
  return new SignJWT({ user_id: 1, role: 'admin' })
    .setProtectedHeader({ alg, typ: 'JWT' })
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(new TextEncoder().encode(secret));
}

async function get(url: string, token?: string): Promise<{ status: number; body: any }> {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(10_000) });
  const text = await res.text();
  return { status: res.status, body: /json/.test(res.headers.get('content-type') ?? '') ? JSON.parse(text) : text };
}

describe('the server process', () => {
  it.each([
    ['PORT', 'abc'],
    ['JWT_ALGORITHM', 'RS999'],
    ['DATABASE_URL', 'mysql://x'],
  ])('a bad %s (%s) stops start-up with one line naming it', async (name, value) => {
    const dataDir = newTemp('dp-proc-bad-');
    const child = startServer({ DATA_DIR: dataDir, PORT: String(await freePort()), LOG_LEVEL: 'error', [name]: value });
    const { code } = await withTimeout(child.exited, START_TIMEOUT_MS, 'the process to exit');
    expect(code).not.toBe(0);
    expect(code).not.toBeNull();
    const lines = child.stderr().split('\n').filter((line) => line !== '');
    expect(lines, child.stderr()).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^invalid setting ${name}: \\S`));
    expect(child.stdout()).not.toMatch(/listening/);
    expect(fs.existsSync(path.join(dataDir, 'secrets.json'))).toBe(false);
  });

  it('NODE_ENV=production without JWT_SECRET stops start-up naming JWT_SECRET', async () => {
    const dataDir = newTemp('dp-proc-prod-');
    const child = startServer({ NODE_ENV: 'production', DATA_DIR: dataDir, PORT: String(await freePort()), LOG_LEVEL: 'error' });
    const { code } = await withTimeout(child.exited, START_TIMEOUT_MS, 'the process to exit');
    expect(code).not.toBe(0);
    const lines = child.stderr().split('\n').filter((line) => line !== '');
    expect(lines, child.stderr()).toHaveLength(1);
    expect(lines[0]).toMatch(/^invalid setting JWT_SECRET: /);
    expect(fs.existsSync(path.join(dataDir, 'secrets.json'))).toBe(false);
  });

  it('starts, prints the docs URL and a one-time admin password, and keeps its generated secret across a restart', { timeout: 120_000 }, async () => {
    const dataDir = newTemp('dp-proc-start-');
    const port = await freePort();
    const env = { DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info' };

    // first start: empty data directory
    const first = startServer(env);
    const [, baseUrl, docsUrl] = await waitForStdout(first, LISTENING);
    expect(baseUrl).toBe(`http://127.0.0.1:${port}`);
    expect(docsUrl).toBe(`http://127.0.0.1:${port}/docs`);
    const [, password] = await waitForStdout(first, /Platform admin "admin" created with the one-time password: (\S+)/, 5_000);
    expect(password.length).toBeGreaterThanOrEqual(16);
    // printed once to the console, never in a log line
    expect(first.stdout().split(password).length - 1).toBe(1);
    expect(first.stderr()).not.toContain(password);

    const secretsFile = path.join(dataDir, 'secrets.json');
    expect(fs.statSync(secretsFile).mode & 0o777).toBe(0o600);
    const secretsBefore = fs.readFileSync(secretsFile, 'utf8');
    const { jwtSecret } = JSON.parse(secretsBefore) as { jwtSecret: string };
    expect(jwtSecret.length).toBeGreaterThanOrEqual(32);

    const token = await adminToken(jwtSecret);
    expect((await get(`${baseUrl}/api/plugins`, token)).status).toBe(200);
    // control: the secret is what makes the token good
    expect((await get(`${baseUrl}/api/plugins`, await adminToken(crypto.randomBytes(48).toString('base64url')))).status).toBe(401);
    expect((await get(`${baseUrl}/api/plugins`)).status).toBe(401);
    expect((await get(`${baseUrl}/docs`)).status).toBe(200);

    first.proc.kill('SIGTERM');
    expect(await withTimeout(first.exited, EXIT_TIMEOUT_MS, 'the first server to stop')).toEqual({ code: 0, signal: null });

    // the printed password is the admin's real password
    const db = new Database(path.join(dataDir, 'platform.db'), { readonly: true });
    try {
      const admin = db.prepare('select id, password_hash from users where username = ?').get('admin') as { id: number; password_hash: string };
      expect(admin.id).toBe(1);
      expect(await verifyPassword(password, admin.password_hash)).toBe(true);
    } finally {
      db.close();
    }

    // second start on the same data directory: same secret, no new admin, the old token still works
    const second = startServer({ ...env, LOG_LEVEL: 'error' });
    const [, baseUrl2] = await waitForStdout(second, LISTENING);
    expect(baseUrl2).toBe(`http://127.0.0.1:${port}`);
    expect(fs.readFileSync(secretsFile, 'utf8')).toBe(secretsBefore);
    expect(fs.statSync(secretsFile).mode & 0o777).toBe(0o600);
    const plugins = await get(`${baseUrl2}/api/plugins`, token);
    expect(plugins.status).toBe(200);
    expect(JSON.stringify(plugins.body)).toContain('"plugins"');
    expect(second.stdout()).not.toMatch(/one-time password/);

    second.proc.kill('SIGTERM');
    expect(await withTimeout(second.exited, EXIT_TIMEOUT_MS, 'the second server to stop')).toEqual({ code: 0, signal: null });
  });

  it('drains a request in flight on SIGTERM and exits 0', { timeout: 90_000 }, async () => {
    const dataDir = newTemp('dp-proc-drain-');
    const manifests = newTemp('dp-proc-manifests-');
    writeManifest(manifests, { id: 'probe', router: { prefix: '/api/probe', tag: 'probe' } }, 'probe');
    const port = await freePort();
    const child = startServer({
      DATA_DIR: dataDir,
      PORT: String(port),
      LOG_LEVEL: 'error',
      ADMIN_PASSWORD: 'admin-password-1',
      MANIFESTS_DIR: [path.join(REPO_ROOT, 'manifests'), manifests].join(path.delimiter),
    });
    const [, baseUrl] = await waitForStdout(child, LISTENING);
    const ready = await get(`${baseUrl}/api/probe`);
    expect(ready).toEqual({ status: 200, body: { plugin: 'probe', version: '1.0.0' } });

    let exitedAt = 0;
    void child.exited.then(() => (exitedAt = Date.now()));
    const started = Date.now();
    const slow = get(`${baseUrl}/api/probe/slow?ms=1500`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(child.hasExited()).toBe(false);
    child.proc.kill('SIGTERM');

    const answer = await withTimeout(slow, 10_000, 'the slow request');
    const answeredAt = Date.now();
    expect(answer).toEqual({ status: 200, body: { plugin: 'probe', version: '1.0.0' } });
    expect(answeredAt - started).toBeGreaterThanOrEqual(1400);

    expect(await withTimeout(child.exited, EXIT_TIMEOUT_MS, 'the server to stop')).toEqual({ code: 0, signal: null });
    expect(exitedAt).toBeGreaterThanOrEqual(answeredAt - 50);
    expect(child.stderr()).toBe('');
    // and nothing listens any more
    await expect(fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(5_000) })).rejects.toThrow();
  });

  it('stops a long governed SQL statement on SIGTERM once the drain time is over, and its query processes with it', { timeout: 90_000 }, async () => {
    const dataDir = newTemp('dp-proc-sql-');
    const jwtSecret = crypto.randomBytes(48).toString('base64url');
    const child = startServer({ DATA_DIR: dataDir, PORT: String(await freePort()), LOG_LEVEL: 'error', PLUGIN_WATCH: 'false', JWT_SECRET: jwtSecret, SHUTDOWN_TIMEOUT_MS: '1000' });
    const [, baseUrl] = await waitForStdout(child, LISTENING);
    // A statement that would run for its whole five minutes.
    const runaway = fetch(`${baseUrl}/api/sql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await adminToken(jwtSecret)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sql: 'with recursive r(n) as (select 1 union all select n + 1 from r) select count(*) from r', timeout_ms: 300_000 }),
    }).then(
      (res) => res.status,
      () => 'connection closed',
    );
    const queryProcesses = () =>
      fs
        .readdirSync('/proc')
        .filter((pid) => /^\d+$/.test(pid))
        .filter((pid) => {
          try {
            return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dataDir);
          } catch {
            return false;
          }
        });
    await withTimeout(
      (async () => {
        while (queryProcesses().length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
      })(),
      START_TIMEOUT_MS,
      'the governed SQL process to start',
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    child.proc.kill('SIGTERM');
    expect(await withTimeout(child.exited, EXIT_TIMEOUT_MS, 'the server to stop')).toEqual({ code: 0, signal: null });
    expect(await runaway).toBe(503);
    expect(queryProcesses()).toEqual([]);
  });

  it.each(['SIGTERM', 'SIGINT'] as const)('`npm start` ends its whole process tree on %s to npm alone', { timeout: 90_000 }, async (signal) => {
    const port = await freePort();
    const child = startServer({ DATA_DIR: newTemp('dp-proc-npm-'), PORT: String(port), LOG_LEVEL: 'error', PLUGIN_WATCH: 'false', ADMIN_PASSWORD: 'admin-password-1' }, ['npm', 'start']);
    const [, baseUrl] = await waitForStdout(child, LISTENING);
    expect((await get(`${baseUrl}/healthz`)).status).toBe(200);
    // The signal goes to npm only (a supervisor's SIGTERM), not to its process group (a terminal's Ctrl-C).
    child.proc.kill(signal);
    expect(await withTimeout(child.exited, EXIT_TIMEOUT_MS, 'npm to exit')).toEqual({ code: 0, signal: null });
    // Nothing npm started lives on: its process group (npm leads it) empties, and the port is free.
    const groupAlive = () => {
      try {
        process.kill(-child.proc.pid!, 0);
        return true;
      } catch {
        return false;
      }
    };
    await withTimeout(
      (async () => {
        while (groupAlive()) await new Promise((resolve) => setTimeout(resolve, 50));
      })(),
      EXIT_TIMEOUT_MS,
      'every process npm started to exit',
    );
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => server.listen(port, '127.0.0.1', resolve).once('error', reject));
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('re-imports a plugin\u2019s own modules on reload, not only its entry; the plugin imports only the SDK', { timeout: 90_000 }, async () => {
    // A third-party plugin outside the repository, with no node_modules of its own: it imports the
    // contract and zod from the SDK's package specifier, and a module of its own.
    const root = newTemp('dp-proc-thirdparty-');
    const pluginDir = path.join(root, 'plugins/hello');
    fs.mkdirSync(pluginDir, { recursive: true });
    fs.mkdirSync(path.join(root, 'manifests'));
    fs.writeFileSync(path.join(root, 'package.json'), JSON.stringify({ type: 'module' }));
    const message = (text: string) => fs.writeFileSync(path.join(pluginDir, 'message.ts'), `export const message = ${JSON.stringify(text)};\n`);
    message('first');
    fs.writeFileSync(
      path.join(pluginDir, 'index.ts'),
      [
        "import { definePlugin, defineRoute, z } from 'data-platform/plugin-api';",
        "import { message } from './message.ts';",
        'export default definePlugin({ deps: {}, init: () => ({ routes: [defineRoute({',
        "  method: 'get', path: '', summary: 'Says the message', security: 'none',",
        "  responses: { 200: { description: 'ok', schema: z.object({ message: z.string() }) } },",
        '  handler: () => ({ message }),',
        '})] }) });',
      ].join('\n'),
    );
    fs.writeFileSync(
      path.join(root, 'manifests/hello.json'),
      JSON.stringify({ id: 'hello', version: '1.0.0', kind: 'router', entry: '../plugins/hello/index.ts', router: { prefix: '/api/hello', tag: 'hello' } }),
    );
    const secret = crypto.randomBytes(32).toString('hex');
    const child = startServer({
      DATA_DIR: newTemp('dp-proc-reload-'),
      PORT: String(await freePort()),
      LOG_LEVEL: 'error',
      ADMIN_PASSWORD: 'admin-password-1',
      JWT_SECRET: secret,
      MANIFESTS_DIR: [path.join(REPO_ROOT, 'manifests'), path.join(root, 'manifests')].join(path.delimiter),
    });
    const [, baseUrl] = await waitForStdout(child, LISTENING);
    expect(await get(`${baseUrl}/api/hello`)).toEqual({ status: 200, body: { message: 'first' } });

    message('second');
    const reload = await fetch(`${baseUrl}/api/plugins/hello/reload`, { method: 'POST', headers: { authorization: `Bearer ${await adminToken(secret)}` }, signal: AbortSignal.timeout(10_000) });
    expect(reload.status).toBe(200);
    expect(await get(`${baseUrl}/api/hello`)).toEqual({ status: 200, body: { message: 'second' } });
  });
});
