import fs from 'node:fs';
import vm from 'node:vm';
import path from 'node:path';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../harness/dialects.ts';
import { REPO_ROOT, startTestKernel, tempDir, writeManifest, type TestKernel } from '../harness/index.ts';

type Operation = {
  operationId?: string;
  tags?: string[];
  summary?: string;
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; required?: boolean; schema?: Record<string, unknown> }[];
  requestBody?: { required?: boolean; content: Record<string, { schema: Record<string, any> }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: Record<string, any> }> }>;
};

/** Every probe route: method, full path, and what its operation must declare. */
const PROBE_ROUTES: {
  method: string;
  path: string;
  params?: { name: string; in: string; required: boolean }[];
  body?: string[];
  responses: string[];
  security: 'none' | 'bearer';
}[] = [
  { method: 'get', path: '/api/probe', responses: ['200', '429', '503', 'default'], security: 'none' },
  { method: 'get', path: '/api/probe/slow', params: [{ name: 'ms', in: 'query', required: true }], responses: ['200', '400', '429', '503', 'default'], security: 'none' },
  {
    method: 'post',
    path: '/api/probe/echo',
    params: [{ name: 'mode', in: 'query', required: false }],
    body: ['name', 'count'],
    responses: ['201', '400', '401', '403', '413', '415', '429', '503', 'default'],
    security: 'bearer',
  },
  { method: 'get', path: '/api/probe/items/{item_id}', params: [{ name: 'item_id', in: 'path', required: true }], responses: ['200', '400', '404', '429', '503', 'default'], security: 'none' },
  { method: 'get', path: '/api/probe/query', responses: ['200', '400', '429', '503', 'default'], security: 'none' },
  { method: 'get', path: '/api/probe/own-head', responses: ['200', '429', '503', 'default'], security: 'none' },
  { method: 'get', path: '/api/probe/boom', responses: ['200', '429', '503', 'default'], security: 'none' },
  { method: 'get', path: '/api/probe/problem/{status}', params: [{ name: 'status', in: 'path', required: true }], responses: ['204', '400', '404', '409', '422', '429', '503', 'default'], security: 'none' },
  { method: 'get', path: '/api/probe/bad-response', responses: ['200', '429', '503', 'default'], security: 'none' },
  { method: 'get', path: '/api/probe/org', params: [{ name: 'X-Org-Id', in: 'header', required: false }], responses: ['200', '400', '401', '403', '404', '429', '503', 'default'], security: 'bearer' },
  { method: 'get', path: '/api/probe/special', responses: ['200', '400', '401', '403', '429', '503', 'default'], security: 'bearer' },
];

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** Every src= and href= value of a page. */
function references(html: string): string[] {
  return [...html.matchAll(/\b(?:src|href)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+))/gi)].map((m) => m[1] ?? m[2] ?? m[3]);
}

/** Inline <script> bodies (no src). */
function inlineScripts(html: string): string[] {
  return [...html.matchAll(/<script(?![^>]*\bsrc=)[^>]*>([\s\S]*?)<\/script>/gi)].map((m) => m[1]);
}

describe.each(DIALECTS)('OpenAPI description and docs (%s)', (dialect) => {
  let t: TestKernel;
  let doc: Record<string, any>;
  const manifests = tempDir();

  beforeAll(async () => {
    writeManifest(
      manifests.dir,
      {
        id: 'probe',
        router: { prefix: '/api/probe', tag: 'probe' },
        capabilities: [{ name: 'probe.special', description: 'Call the special probe route', roles: ['editor'] }],
      },
      'probe',
    );
    t = await startTestKernel({ dialect, manifestDirs: [path.join(REPO_ROOT, 'manifests'), manifests.dir] });
    const res = await t.request('GET', '/openapi.json', { token: null });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    doc = res.body;
  });
  afterAll(async () => {
    await t?.stop();
    manifests.remove();
  });

  describe('/openapi.json', () => {
    it('is OpenAPI 3.1 with the release as its version', () => {
      expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
      expect(doc.info.version).toBe('0.1.8');
      expect(doc.info.title).toEqual(expect.any(String));
    });

    it('declares the security schemes its routes use, and no other', () => {
      expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
      // the service path of API Services (the api_service router) takes a data API key
      expect(doc.components.securitySchemes.apiKey).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
      expect(Object.keys(doc.components.securitySchemes).sort()).toEqual(['apiKey', 'bearerAuth']);
    });

    it('names a relative server when PUBLIC_URL is not set', () => {
      expect(doc.servers).toEqual([{ url: '/' }]);
    });

    it('has one tag per router, and every operation carries exactly its router tag', async () => {
      // the routers loaded: the repository's manifests (whatever they are today) plus the probe fixture
      const plugins = await t.request('GET', '/api/plugins');
      expect(plugins.status).toBe(200);
      const loaded = new Set((plugins.body as { id: string; state: string }[]).filter((p) => p.state === 'loaded').map((p) => p.id));
      expect(loaded).toContain('plugins');
      expect(loaded).toContain('probe');
      const manifestFiles = [
        ...fs.readdirSync(path.join(REPO_ROOT, 'manifests')).map((f) => path.join(REPO_ROOT, 'manifests', f)),
        path.join(manifests.dir, 'probe.json'),
      ].filter((f) => f.endsWith('.json'));
      const routers = manifestFiles
        .map((f) => JSON.parse(fs.readFileSync(f, 'utf8')) as { id: string; router?: { prefix: string; tag: string; pages?: string } })
        .filter((m) => m.router && loaded.has(m.id))
        // A router's pages (under /p) carry its tag as its API routes do.
        .flatMap((m) => [m.router!, ...(m.router!.pages ? [{ prefix: m.router!.pages, tag: m.router!.tag }] : [])]);

      const tags: string[] = doc.tags.map((tag: { name: string }) => tag.name);
      expect(tags).toEqual(expect.arrayContaining(['plugins', 'probe']));
      expect(new Set(tags).size).toBe(tags.length);
      const used = new Set<string>();
      for (const [route, item] of Object.entries<Record<string, Operation>>(doc.paths)) {
        const router = routers.filter((r) => route === r.prefix || route.startsWith(`${r.prefix}/`)).sort((a, b) => b.prefix.length - a.prefix.length)[0];
        expect(router, `${route} belongs to no loaded router`).toBeDefined();
        for (const method of Object.keys(item).filter((k) => HTTP_METHODS.includes(k))) {
          expect(item[method].tags, `${method} ${route}`).toEqual([router.tag]);
          used.add(router.tag);
        }
      }
      // exactly the tags of the routers that contribute operations, each once
      expect([...tags].sort()).toEqual([...used].sort());
      expect(used).toContain('probe');
      expect(used).toContain('plugins');
    });

    it('describes every probe route, and nothing more under /api/probe', () => {
      const probePaths = Object.entries<Record<string, Operation>>(doc.paths)
        .filter(([p]) => p.startsWith('/api/probe'))
        .flatMap(([p, item]) => Object.keys(item).filter((k) => HTTP_METHODS.includes(k)).map((m) => `${m} ${p}`));
      expect(probePaths.sort()).toEqual(PROBE_ROUTES.map((r) => `${r.method} ${r.path}`).sort());
    });

    it.each(PROBE_ROUTES)('$method $path declares its parameters, body, responses and security', (route) => {
      const op: Operation = doc.paths[route.path][route.method];
      expect(op.operationId).toEqual(expect.any(String));
      expect(op.summary).toEqual(expect.any(String));

      const params = (op.parameters ?? []).map((p) => ({ name: p.name, in: p.in, required: p.required ?? false }));
      expect(params).toEqual(route.params ?? []);
      for (const p of op.parameters ?? []) expect(p.schema).toBeTypeOf('object');

      if (route.body) {
        expect(op.requestBody?.required).toBe(true);
        const schema = op.requestBody!.content['application/json'].schema;
        expect(Object.keys(schema.properties).sort()).toEqual([...route.body].sort());
        expect([...schema.required].sort()).toEqual([...route.body].sort());
      } else {
        expect(op.requestBody).toBeUndefined();
      }

      expect(Object.keys(op.responses).sort()).toEqual([...route.responses].sort());
      for (const [status, response] of Object.entries(op.responses)) {
        expect(response.description, status).toEqual(expect.any(String));
        if (Number(status) >= 400 || status === 'default') {
          expect(Object.keys(response.content ?? {}), status).toEqual(['application/problem+json']);
          expect(response.content!['application/problem+json'].schema, status).toEqual({ $ref: '#/components/schemas/Problem' });
        }
      }
      expect(op.security).toEqual(route.security === 'bearer' ? [{ bearerAuth: [] }] : []);
    });

    it('real error answers are problem+json, valid against the Problem schema, at statuses their operation declares', async () => {
      const ajv = new Ajv2020({ strict: false });
      const problem = ajv.compile({ ...doc.components.schemas.Problem, $id: 'Problem' });
      const raw = (init: RequestInit & { token?: boolean }) =>
        fetch(new URL('/api/probe/echo', t.url), { method: 'POST', ...init, headers: { ...(init.token === false ? {} : { Authorization: `Bearer ${t.adminToken}` }), ...(init.headers as Record<string, string>) } });
      const answers = [
        await raw({ token: false, body: '{}', headers: { 'Content-Type': 'application/json' } }),
        await raw({ body: JSON.stringify({ name: '' }), headers: { 'Content-Type': 'application/json' } }),
        await raw({ body: '{"name":', headers: { 'Content-Type': 'application/json' } }),
        await raw({ body: 'name=x', headers: { 'Content-Type': 'text/plain' } }),
        await raw({ body: JSON.stringify({ name: 'x'.repeat(2_000_000), count: 1 }), headers: { 'Content-Type': 'application/json' } }),
      ];
      expect(answers.map((res) => res.status)).toEqual([401, 400, 400, 415, 413]);
      for (const res of answers) {
        expect(Object.keys(doc.paths['/api/probe/echo'].post.responses)).toContain(String(res.status));
        expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
        const body = await res.json();
        expect(problem(body), JSON.stringify(problem.errors)).toBe(true);
      }
    });

    it('a route\'s explicitly declared error status wins over the derived one', () => {
      const plugins = doc.paths['/api/plugins/{id}/reload']?.post as Operation | undefined;
      expect(plugins, 'POST /api/plugins/{id}/reload').toBeDefined();
      expect(plugins!.responses['404'].description).toMatch(/no plugin/i);
      expect(plugins!.responses['422'].content).toEqual({ 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } });
    });

    it('describes the echo body and answer precisely', () => {
      const echo: Operation = doc.paths['/api/probe/echo'].post;
      const body = echo.requestBody!.content['application/json'].schema;
      expect(body.properties.name).toMatchObject({ type: 'string', minLength: 1 });
      expect(body.properties.count).toMatchObject({ type: 'integer' });
      const mode = echo.parameters!.find((p) => p.name === 'mode')!;
      expect(mode.schema).toMatchObject({ type: 'string', enum: ['plain', 'loud'], default: 'plain' });
      const created = echo.responses['201'].content!['application/json'].schema;
      expect(Object.keys(created.properties).sort()).toEqual(['count', 'mode', 'name']);
    });

    it('lists the plugins router', () => {
      expect(doc.paths['/api/plugins']?.get).toBeDefined();
      expect(doc.paths['/api/plugins'].get.security).toEqual([{ bearerAuth: [] }]);
    });

    it('passes a standard OpenAPI validator', async () => {
      const validator = new Validator();
      const result = await validator.validate(structuredClone(doc));
      expect(result.errors ?? []).toEqual([]);
      expect(result.valid).toBe(true);
      expect(validator.version).toMatch(/^3\.1/);
    });

    it('every $ref resolves inside the document', () => {
      const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1]);
      expect(refs.length).toBeGreaterThan(0);
      for (const ref of refs) {
        expect(ref.startsWith('#/')).toBe(true);
        const target = ref
          .slice(2)
          .split('/')
          .reduce<any>((node, key) => node?.[key.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
        expect(target, ref).toBeTypeOf('object');
      }
    });
  });

  describe.each([
    ['/docs', 'Swagger UI'],
    ['/redoc', 'Redoc'],
  ])('%s (%s)', (page) => {
    let html: string;
    beforeAll(async () => {
      const res = await t.request('GET', page, { token: null });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      html = res.text;
    });

    it('is an HTML page that loads the description from this server', () => {
      expect(html).toMatch(/^<!DOCTYPE html>/i);
      expect(html).toMatch(/["']\/openapi\.json["']/);
    });

    it('references no other host', () => {
      const refs = references(html);
      expect(refs.length).toBeGreaterThan(0);
      for (const ref of refs) {
        const resolved = new URL(ref, t.url);
        expect(resolved.origin, ref).toBe(t.url);
        if (/^https?:/i.test(ref)) expect(ref.startsWith(t.url), ref).toBe(true);
        expect(ref.startsWith('//'), ref).toBe(false);
      }
      // nothing outside src/href either: no script or stylesheet URL to the internet anywhere in the page
      const external = [...html.matchAll(/https?:\/\/[^\s"'<>)]+/g)].map((m) => m[0]).filter((u) => !u.startsWith('http://www.w3.org/') && !u.startsWith(t.url));
      expect(external).toEqual([]);
      expect(html).not.toMatch(/@import/);
    });

    it('every referenced asset loads from the kernel with a sensible content type', async () => {
      const refs = references(html);
      for (const ref of refs) {
        const res = await fetch(new URL(ref, t.url));
        const body = Buffer.from(await res.arrayBuffer());
        expect(res.status, ref).toBe(200);
        const type = res.headers.get('content-type') ?? '';
        if (ref.endsWith('.js')) expect(type, ref).toMatch(/^(application|text)\/javascript/);
        else if (ref.endsWith('.css')) expect(type, ref).toMatch(/^text\/css/);
        else if (ref.endsWith('.png')) {
          expect(type, ref).toBe('image/png');
          expect(body.subarray(1, 4).toString('latin1')).toBe('PNG');
        } else if (ref === '/favicon.ico') {
          expect(type, ref).toBe('image/svg+xml');
          expect(body.toString('utf8')).toMatch(/^<svg /);
        } else throw new Error(`unexpected asset ${ref}`);
        expect(body.length, ref).toBeGreaterThan(/\.(png|ico)$/.test(ref) ? 100 : 1000);
        if (ref.endsWith('.css')) {
          // a stylesheet may only pull in inline data or files of this server
          const urls = [...body.toString('utf8').matchAll(/url\(\s*["']?([^"')]+)/g)].map((m) => m[1]);
          for (const u of urls) expect(u.startsWith('data:') || new URL(u, new URL(ref, t.url)).origin === t.url, u).toBe(true);
        }
      }
    });

    it('its inline scripts are valid JavaScript', () => {
      for (const code of inlineScripts(html)) expect(() => new vm.Script(code)).not.toThrow();
    });

    it('allows only this server in its Content-Security-Policy', async () => {
      const res = await fetch(new URL(page, t.url));
      const csp = res.headers.get('content-security-policy') ?? '';
      expect(csp).toContain("default-src 'self'");
      expect(csp).not.toMatch(/https?:|\*/);
      expect(res.headers.get('cross-origin-opener-policy')).toBe('same-origin');
      expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    });
  });

  it('Swagger UI loads /openapi.json and sends nothing to the public online validator', async () => {
    const res = await t.request('GET', '/docs', { token: null });
    const options = /const options = (\{.*\});/.exec(res.text);
    expect(options, 'Swagger UI options in the page').not.toBeNull();
    const parsed = JSON.parse(options![1]);
    expect(parsed.url).toBe('/openapi.json');
    // Swagger UI otherwise shows a badge image from validator.swagger.io on every non-localhost host
    expect(parsed).toHaveProperty('validatorUrl', null);
  });

  it('Redoc reads /openapi.json', async () => {
    const res = await t.request('GET', '/redoc', { token: null });
    expect(res.text).toMatch(/<redoc[^>]+spec-url="\/openapi\.json"/);
  });
});
