import { OpenAPIRegistry, OpenApiGeneratorV31, type RouteConfig } from '@asteasolutions/zod-to-openapi';
import { z, type ZodType } from 'zod';
import { derivedProblems, problemSchema } from './openapi-problems.ts';
import type { MountedRoute } from './registry/generation.ts';
import { RELEASE } from './release.ts';

const problemResponse = (description: string) => ({ description, content: { 'application/problem+json': { schema: problemSchema } } });

const SECURITY: Record<string, Record<string, string[]>[]> = { none: [], bearer: [{ bearerAuth: [] }], apiKey: [{ apiKey: [] }] };

function operationId(m: MountedRoute): string {
  const words = m.path.replace(/^\/api\//, '').split(/[/{}-]+/).filter(Boolean);
  return [m.route.method, ...words].map((w, i) => (i === 0 ? w : w[0].toUpperCase() + w.slice(1))).join('');
}

/** The OpenAPI 3.1 description of a set of mounted routes: one operation per route declaration. */
export function buildOpenApiDocument(routes: MountedRoute[], serverUrl?: string): Record<string, unknown> {
  const registry = new OpenAPIRegistry();
  // Only the schemes some route uses: an unused one would promise clients a way in that leads nowhere.
  const used = new Set(routes.map((m) => m.route.security));
  if (used.has('bearer')) registry.registerComponent('securitySchemes', 'bearerAuth', { type: 'http', scheme: 'bearer', description: 'JWT from /api/auth/login, or a personal access token (svc_…)' });
  if (used.has('apiKey')) registry.registerComponent('securitySchemes', 'apiKey', { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'Data API key of a published API Service' });

  for (const m of routes) {
    const { route } = m;
    const responses: RouteConfig['responses'] = {};
    for (const [status, response] of Object.entries(route.responses)) {
      responses[status] = response.schema
        ? { description: response.description, content: { 'application/json': { schema: response.schema } } }
        : response.content
          ? { description: response.description, content: Object.fromEntries(Object.entries(response.content).map(([type, schema]) => [type, { schema }])) }
          : Number(status) >= 400
            ? problemResponse(response.description)
            : { description: response.description };
    }
    for (const [status, description] of derivedProblems(m.path, route)) responses[status] ??= problemResponse(description);
    responses.default = problemResponse('Any other error, as problem details (a 500 names only the request id)');

    const orgHeader = z.object({
      'X-Org-Id': z.string().regex(/^\d+$/).optional().describe('Current organization; default: your default organization'),
    });
    registry.registerPath({
      method: route.method,
      path: m.path,
      operationId: operationId(m),
      tags: [m.tag],
      summary: route.summary,
      description: route.description,
      security: SECURITY[route.security],
      request: {
        params: route.request?.params,
        query: route.request?.query,
        headers: route.orgScoped ? (route.request?.headers ? route.request.headers.extend(orgHeader.shape) : orgHeader) : route.request?.headers,
        body: route.request?.body
          ? { required: true, content: Object.fromEntries((route.request.bodyTypes ?? ['application/json']).map((type: string) => [type, { schema: route.request!.body! }])) }
          : route.request?.stream
            ? {
                required: true,
                description: route.request.stream.description,
                content: Object.fromEntries(route.request.stream.contentTypes.map((type: string) => [type, route.request!.stream!.schemas?.[type] ?? { schema: z.string().meta({ format: 'binary' }) }])),
              }
            : undefined,
      },
      responses,
    });
  }

  // A tag is a router; its description is the manifest's `description` of the plugin serving it.
  const tagDescriptions = new Map<string, string | undefined>();
  for (const m of routes) if (!tagDescriptions.get(m.tag)) tagDescriptions.set(m.tag, m.plugin.manifest.description);
  const tags = [...tagDescriptions].sort(([a], [b]) => a.localeCompare(b)).map(([name, description]) => ({ name, description }));
  const document = new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Data Platform API',
      version: RELEASE,
      description: 'Multi-tenant data platform. Org-scoped routes take the X-Org-Id header. Every error is an RFC 9457 problem (`application/problem+json`).',
      // No license is granted (package.json is private and names none): said outright rather than left
      // out, as npm's UNLICENSED (an SPDX LicenseRef, as SPDX has no id for it). Change when one is chosen.
      license: { name: 'UNLICENSED', identifier: 'LicenseRef-UNLICENSED' },
    },
    // PUBLIC_URL when set; else relative, so the description serves whichever host delivered it.
    servers: [{ url: serverUrl ?? '/' }],
    tags,
  });
  markRequiredParameters(document as never, routes);
  return document as unknown as Record<string, unknown>;
}

type ParameterObject = { name?: string; in?: string; required?: boolean };

/**
 * zod-to-openapi calls a parameter optional when its schema accepts undefined *or null*, so a
 * coercing schema (`z.coerce.number()` turns null into 0) came out optional although the request
 * is refused without it. A query or header parameter is required exactly when validation refuses
 * it missing.
 */
function markRequiredParameters(document: { paths?: Record<string, Record<string, { parameters?: ParameterObject[] }>> }, routes: MountedRoute[]) {
  for (const m of routes) {
    for (const parameter of document.paths?.[m.path]?.[m.route.method]?.parameters ?? []) {
      const shape = parameter.in === 'query' ? m.route.request?.query?.shape : parameter.in === 'header' ? m.route.request?.headers?.shape : undefined;
      const schema = parameter.name === undefined ? undefined : (shape?.[parameter.name] as ZodType | undefined);
      if (schema) parameter.required = !schema.safeParse(undefined).success;
    }
  }
}
