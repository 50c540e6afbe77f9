import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, tempDir, type TestKernel } from '../harness/index.ts';

const run = promisify(execFile);
const REDOCLY = path.join(REPO_ROOT, 'node_modules', '@redocly', 'cli', 'bin', 'cli.js');
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch'];

interface LintProblem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location: { pointer?: string }[];
}

/** The whole description of the shipped plugins, as a client downloads it. */
describe.each(DIALECTS)('/openapi.json of the shipped plugins (%s)', (dialect) => {
  let t: TestKernel;
  let doc: Record<string, any>;
  const dir = tempDir();

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
    const res = await t.request('GET', '/openapi.json', { token: null });
    expect(res.status).toBe(200);
    doc = res.body;
  });
  afterAll(async () => {
    await t?.stop();
    dir.remove();
  });

  it("passes Redocly's recommended rules with no error and no warning", async () => {
    const file = path.join(dir.dir, 'openapi.json');
    fs.writeFileSync(file, JSON.stringify(doc));
    // Redocly sends usage telemetry and checks npm for updates unless told not to: the test stays offline.
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
    // It exits 1 when it finds an error: the JSON report on stdout is what counts either way.
    const { stdout } = await run(process.execPath, [REDOCLY, 'lint', '--extends=recommended', '--format=json', file], { env, cwd: dir.dir, maxBuffer: 64 * 1024 * 1024 }).catch(
      (err: { stdout?: string; stderr?: string }) => {
        if (!err.stdout) throw new Error(`redocly lint did not report: ${err.stderr}`);
        return { stdout: err.stdout };
      },
    );
    const report = JSON.parse(stdout) as { totals: { errors: number; warnings: number }; problems: LintProblem[] };
    const found = report.problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location.map((l) => l.pointer).join(', ')}`);
    expect(found).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);

  it('every operation has a summary and a description of its own, every tag a description', () => {
    for (const [route, item] of Object.entries<Record<string, { summary?: string; description?: string }>>(doc.paths)) {
      for (const method of Object.keys(item).filter((k) => HTTP_METHODS.includes(k))) {
        const { summary, description } = item[method];
        expect(summary?.trim(), `${method} ${route} summary`).toBeTruthy();
        expect(description?.trim(), `${method} ${route} description`).toBeTruthy();
        expect(description!.trim(), `${method} ${route} description repeats its summary`).not.toBe(summary!.trim());
      }
    }
    for (const tag of doc.tags) expect(tag.description?.trim(), `tag ${tag.name}`).toBeTruthy();
  });
});
