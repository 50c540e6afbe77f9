import type { Context } from 'koa';
import { fieldErrorsOf, HttpProblem, identitySchemas as s, problems, readFormFile, z } from '../../kernel/plugin-api.ts';
import { TASKS } from './algorithms.ts';
import type { Feature } from './encoding.ts';
import type { OnnxOutput } from './onnx-model.ts';

const name = s.displayName;

const declaredFeatures = z.array(z.object({ name, type: z.enum(['integer', 'number', 'string', 'boolean']) }).strict()).min(1).max(200);
const declaredOutput = z.object({ name: name.optional(), task: z.enum(TASKS), labels: z.array(name).min(1).max(10_000).optional() }).strict();

/** How the form is described (OpenAPI): the file and the two declarations as JSON text. */
export const IMPORT_FORM = {
  'multipart/form-data': {
    schema: z.object({
      file: z.string().meta({ format: 'binary' }).describe('The ONNX model'),
      features: z.string().describe('JSON: [{name, type: integer|number|string|boolean}], the inputs in order (one input per feature, or all packed into a single [n, k] input)'),
      output: z.string().describe('JSON: {name?, task: regression|classification, labels?}: the output read (default the first) and, for a classifier, its class names by index'),
    }),
    encoding: { file: { contentType: 'application/octet-stream' } },
  },
};

export interface ImportRequest {
  file: Buffer;
  features: Feature[];
  output: OnnxOutput;
}

const tooLarge = (limit: string) => new HttpProblem(413, `the model is larger than REGISTRY_ONNX_LIMIT (${limit})`);

function declared<T>(schema: z.ZodType<T>, text: string | undefined, field: string): T {
  if (text === undefined) throw problems.badRequest(`the form has no field "${field}"`, [{ path: `body.${field}`, message: 'required' }]);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw problems.badRequest(`${field} is not JSON: ${(err as Error).message}`, [{ path: `body.${field}`, message: 'not JSON' }]);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw problems.badRequest(`${field} is not as declared`, fieldErrorsOf(parsed.error.issues, `body.${field}`));
  return parsed.data;
}

/**
 * Reads the import form (the file `file`, the fields `features` and `output` as JSON), holding at
 * most `limitBytes` of the file (a 413 past it).
 */
export async function readImportForm(ctx: Context, limitBytes: number, limitText: string): Promise<ImportRequest> {
  const form = await readFormFile(ctx, { field: 'file', limitBytes, tooLarge: () => tooLarge(limitText), what: 'an import (file, features, output)' });
  const features = declared(declaredFeatures, form.fields.features, 'features');
  features.forEach((f, i) => {
    if (features.findIndex((g) => g.name === f.name) !== i) throw problems.badRequest(`feature ${f.name} is declared twice`, [{ path: `body.features.${i}.name`, message: 'declared twice' }]);
  });
  return { file: form.file, features, output: declared(declaredOutput, form.fields.output, 'output') };
}
