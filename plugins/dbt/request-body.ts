import busboy from 'busboy';
import type { Context } from 'koa';
import { z } from 'zod';
import { fieldErrorsOf, HttpProblem, identitySchemas as s, problems, refuseUnfitJson } from '../../kernel/plugin-api.ts';

/** What an import is given: the project to import into, the manifest and, optionally, the catalog (parsed JSON). */
export interface ImportRequest {
  projectId: number;
  manifest: unknown;
  catalog: unknown;
}

export const IMPORT_TYPES = ['application/json', 'multipart/form-data'];

const jsonBody = z.object({
  project_id: s.recordId,
  manifest: z.record(z.string(), z.unknown()).describe("dbt's target/manifest.json (schema v7 to v12)"),
  catalog: z.record(z.string(), z.unknown()).optional().describe("dbt's target/catalog.json (`dbt docs generate`): column types"),
});
const jsonFile = z.string().meta({ format: 'binary' });

/** How the body is described: a JSON object, or a form with the files. */
export const IMPORT_SCHEMAS = {
  'application/json': { schema: jsonBody },
  'multipart/form-data': {
    schema: z.object({ project_id: z.string().describe('The project to import into'), manifest: jsonFile.describe('target/manifest.json'), catalog: jsonFile.optional().describe('target/catalog.json') }),
    encoding: { manifest: { contentType: 'application/json, application/octet-stream' }, catalog: { contentType: 'application/json, application/octet-stream' } },
  },
};

const tooLarge = (limit: string) => new HttpProblem(413, `the manifest is larger than DBT_MANIFEST_LIMIT (${limit})`);

/**
 * Reads an import's body, JSON or a multipart form (`project_id`, files `manifest` and `catalog`),
 * holding at most `limitBytes` (a 413 past it; the rest of the body is read and dropped so the
 * answer reaches the client); what is not JSON, or holds what no JSON body may (a NUL character, a
 * lone surrogate, nesting past 100 levels), is a 400 naming the field.
 */
export async function readImportRequest(ctx: Context, limitBytes: number, limitText: string): Promise<ImportRequest> {
  if (ctx.is('multipart/form-data')) return readForm(ctx, limitBytes, limitText);
  const text = await readAll(ctx, limitBytes, limitText);
  const parsed = jsonBody.safeParse(parseJson(text, 'body'));
  if (!parsed.success) throw problems.badRequest('the body is not a valid import', fieldErrorsOf(parsed.error.issues, 'body'));
  refuseUnfitJson(parsed.data.manifest, 'body.manifest');
  if (parsed.data.catalog) refuseUnfitJson(parsed.data.catalog, 'body.catalog');
  return { projectId: parsed.data.project_id, manifest: parsed.data.manifest, catalog: parsed.data.catalog };
}

function readAll(ctx: Context, limitBytes: number, limitText: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    ctx.req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limitBytes) chunks.push(chunk);
    });
    ctx.req.on('end', () => (size > limitBytes ? reject(tooLarge(limitText)) : resolve(Buffer.concat(chunks).toString('utf8'))));
    ctx.req.on('error', reject);
  });
}

function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw problems.badRequest(`${where === 'body' ? 'the body' : where.slice(5)} is not JSON: ${(err as Error).message}`, [{ path: where, message: 'not JSON' }]);
  }
}

function readForm(ctx: Context, limitBytes: number, limitText: string): Promise<ImportRequest> {
  return new Promise((resolve, reject) => {
    let form: busboy.Busboy;
    try {
      form = busboy({ headers: ctx.req.headers, limits: { files: 2, fields: 10, fileSize: limitBytes } });
    } catch (err) {
      return reject(problems.badRequest(`malformed multipart body: ${(err as Error).message}`, [{ path: 'body', message: 'malformed' }]));
    }
    const files: Record<string, Buffer[]> = {};
    const fields: Record<string, string> = {};
    let size = 0;
    let failure: Error | null = null;
    form.on('field', (name, value) => (fields[name] = value));
    form.on('file', (name, stream) => {
      stream.on('error', () => undefined);
      if (name !== 'manifest' && name !== 'catalog') return stream.resume();
      const chunks: Buffer[] = (files[name] = []);
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > limitBytes) failure ??= tooLarge(limitText);
        else chunks.push(chunk);
      });
      stream.on('limit', () => (failure ??= tooLarge(limitText)));
    });
    form.on('error', (err) => reject(problems.badRequest(`malformed multipart body: ${(err as Error).message}`, [{ path: 'body', message: 'malformed' }])));
    form.on('close', () => {
      if (failure) return reject(failure);
      try {
        const projectId = Number(fields.project_id);
        if (!/^\d{1,15}$/.test(fields.project_id ?? '') || projectId < 1) throw problems.badRequest('project_id must be a positive integer', [{ path: 'body.project_id', message: 'a positive integer' }]);
        if (!files.manifest) throw problems.badRequest('the form has no file named "manifest"', [{ path: 'body.manifest', message: 'required' }]);
        const manifest = parseJson(Buffer.concat(files.manifest).toString('utf8'), 'body.manifest');
        const catalog = files.catalog ? parseJson(Buffer.concat(files.catalog).toString('utf8'), 'body.catalog') : undefined;
        for (const [name, value] of [['manifest', manifest], ['catalog', catalog]] as const) {
          if (value !== undefined && (typeof value !== 'object' || value === null || Array.isArray(value))) throw problems.badRequest(`${name} must be a JSON object`, [{ path: `body.${name}`, message: 'not an object' }]);
          if (value !== undefined) refuseUnfitJson(value, `body.${name}`);
        }
        resolve({ projectId, manifest, catalog });
      } catch (err) {
        reject(err);
      }
    });
    ctx.req.pipe(form);
  });
}

