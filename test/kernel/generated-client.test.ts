import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS, REPO_ROOT, startTestKernel, type TestKernel } from '../harness/index.ts';

const run = promisify(execFile);

/**
 * The document is the REST clients' contract: a client generated from the running server's
 * /openapi.json (openapi-typescript types, openapi-fetch calls) must type-check strictly — no cast,
 * no `any` — while it walks through login, a project, a dataset, CSV uploads as text/csv and as
 * multipart, filtered rows, a JSON export and governed SQL, and must then run against the server.
 */
describe.each(DIALECTS)('a client generated from /openapi.json (%s)', (dialect) => {
  let t: TestKernel;
  // Inside the repository (ignored by git) so the program resolves openapi-fetch from its node_modules.
  const dir = fs.mkdtempSync(path.join(REPO_ROOT, 'test/.generated-client-'));

  beforeAll(async () => {
    t = await startTestKernel({ dialect });
  });
  afterAll(async () => {
    await t?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('type-checks strictly and runs the walkthrough', { timeout: 180_000 }, async () => {
    const document = (await t.request('GET', '/openapi.json', { token: null })).body;
    fs.writeFileSync(path.join(dir, 'schema.d.ts'), astToString(await openapiTS(document)));
    const program = fs.readFileSync(path.join(REPO_ROOT, 'test/client/walkthrough.ts.txt'), 'utf8');
    expect(escapeHatches(program)).toEqual([]);
    fs.writeFileSync(path.join(dir, 'walkthrough.ts'), program);
    fs.writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, noEmit: true, target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', allowImportingTsExtensions: true, lib: ['es2022', 'dom'], types: ['node'], skipLibCheck: false, noUncheckedIndexedAccess: false },
        files: ['walkthrough.ts', 'schema.d.ts'],
      }),
    );
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module' }));

    const tsc = path.join(REPO_ROOT, 'node_modules/.bin/tsc');
    const checked = await run(tsc, ['-p', dir], { cwd: dir }).then(
      () => '',
      (err: { stdout?: string; stderr?: string }) => `${err.stdout ?? ''}${err.stderr ?? ''}`,
    );
    expect(checked, 'tsc --noEmit (strict) of the walkthrough against the generated types').toBe('');

    // The bootstrap admin as a new install has it: the walkthrough changes its password first.
    const tsx = path.join(REPO_ROOT, 'node_modules/.bin/tsx');
    const { stdout } = await run(tsx, [path.join(dir, 'walkthrough.ts')], { cwd: dir, env: { ...process.env, PLATFORM_URL: t.url, PLATFORM_PASSWORD: 'admin-password-1' } });
    expect(JSON.parse(stdout.trim().split('\n').at(-1)!)).toEqual({ loaded: [3, 3], amounts: [12.5, 12.5, 3, 3], exported: 6, totals: ['DE=14', 'FR=31'], build: 'succeeded', failed: 0, origins: ['orders.amount:aggregated'], steps: ['capture_contract:succeeded', 'drift gate:succeeded'] });
  });
});

/** Where a program steps around the types: casts (`as T`, `<T>x`), non-null assertions, `any`, `@ts-` comments. */
function escapeHatches(source: string): string[] {
  const file = ts.createSourceFile('walkthrough.ts', source, ts.ScriptTarget.ES2022, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    const isConstAssertion = ts.isAsExpression(node) && ts.isTypeReferenceNode(node.type) && node.type.getText() === 'const';
    if ((ts.isAsExpression(node) && !isConstAssertion) || ts.isTypeAssertionExpression(node) || ts.isNonNullExpression(node) || node.kind === ts.SyntaxKind.AnyKeyword) found.push(node.getText());
    ts.forEachChild(node, visit);
  };
  visit(file);
  if (/@ts-/.test(source)) found.push('@ts- comment');
  return found;
}
