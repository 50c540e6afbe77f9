import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';

type Schema = Record<string, unknown>;
type MediaTypes = Record<string, { schema?: Schema }>;
type Operation = { responses?: Record<string, { content?: MediaTypes }> };
type OpenApiDocument = { paths?: Record<string, Record<string, Operation>>; components?: { schemas?: Record<string, Schema> } };

/** Where the document's named schemas live once added to ajv: `#/components/schemas/X` becomes `DOC#/$defs/X`. */
const DOC = 'openapi-components';

/**
 * The schema as the test reads it: references point into the added components, and an object
 * that lists its properties is closed. zod objects strip unknown keys, so the document leaves them
 * open; closing them here makes a field the answer carries but the document does not name (a
 * client would never see it in its types) a failure too.
 */
function forTest(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(forTest);
  if (typeof schema !== 'object' || schema === null) return schema;
  const copy: Schema = Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, forTest(value)]));
  if (typeof copy.$ref === 'string') copy.$ref = copy.$ref.replace('#/components/schemas/', `${DOC}#/$defs/`);
  if (copy.properties && copy.additionalProperties === undefined) copy.additionalProperties = false;
  return copy;
}

/** A path template as a pattern: `/api/datasets/{id}` matches `/api/datasets/7`. */
const templatePattern = (template: string) => new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`);

const paramCount = (template: string) => (template.match(/\{/g) ?? []).length;

/**
 * Checks real answers against the OpenAPI document the kernel serves: the answer's status and
 * media type are declared by the operation its method and path match, and a JSON body validates
 * against that media type's schema (ajv, JSON Schema 2020-12 as OpenAPI 3.1 uses).
 */
export class AnswerChecker {
  private readonly ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
  private readonly compiled = new Map<Schema, ValidateFunction>();
  /** Templates with literal segments first: `/api/users/me` wins over `/api/users/{id}`. */
  private readonly templates: { template: string; pattern: RegExp }[];

  constructor(private readonly document: OpenApiDocument) {
    this.ajv.addSchema({ $id: DOC, $defs: forTest(document.components?.schemas ?? {}) as Schema });
    this.templates = Object.keys(document.paths ?? {})
      .sort((a, b) => paramCount(a) - paramCount(b))
      .map((template) => ({ template, pattern: templatePattern(template) }));
  }

  private operation(method: string, url: string): { template: string; operation: Operation } | undefined {
    const path = new URL(url, 'http://localhost').pathname;
    const template = this.templates.find((t) => t.pattern.test(path) && this.document.paths![t.template][method.toLowerCase()])?.template;
    return template ? { template, operation: this.document.paths![template][method.toLowerCase()] } : undefined;
  }

  /** Whether an operation of the document serves this method and path. */
  matches(method: string, url: string): boolean {
    return this.operation(method, url) !== undefined;
  }

  /** What is wrong with the answer, or undefined when the document describes it (or the path is no operation's). */
  problem(method: string, url: string, status: number, contentType: string | null, body: unknown, text: string): string | undefined {
    const found = this.operation(method, url);
    if (!found) return undefined;
    const { template, operation } = found;
    const where = `${method.toUpperCase()} ${template} answered ${status}`;
    const responses = operation.responses ?? {};
    const response = responses[status] ?? responses[`${String(status)[0]}XX`] ?? responses.default;
    if (!response) return `${where}, a status its operation does not declare`;
    // An error answer a client handles (4xx, 502, 503, 504) is declared under its own status, so
    // its generated types and its description say when it happens; only a 500 may rest on `default`.
    if (!responses[status] && (status >= 400 && status < 500 || status === 502 || status === 503 || status === 504)) {
      return `${where}, which its operation does not declare under its own status (only \`default\` matches)`;
    }
    if (!text || method.toUpperCase() === 'HEAD') return undefined;
    const mediaType = (contentType ?? '').split(';')[0].trim().toLowerCase();
    const declared = response.content?.[mediaType];
    if (!declared) return `${where} as ${mediaType || 'no media type'}, which it declares only as ${Object.keys(response.content ?? {}).join(', ') || 'no content'}`;
    if (!/json/.test(mediaType) || !declared.schema) return undefined;
    let validate = this.compiled.get(declared.schema);
    if (!validate) {
      validate = this.ajv.compile(forTest(declared.schema) as Schema);
      this.compiled.set(declared.schema, validate);
    }
    if (validate(body)) return undefined;
    const errors = (validate.errors ?? []).map((e) => `body${e.instancePath} ${e.message}${e.params.additionalProperty ? ` ("${e.params.additionalProperty}")` : ''}`);
    return `${where} a ${mediaType} body that breaks its declared schema: ${errors.join('; ')}`;
  }
}
