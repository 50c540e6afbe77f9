import busboy from 'busboy';
import type { Context } from 'koa';
import { HttpProblem, problems } from '../problem.ts';

/** One file of a multipart form, with the form's text fields. */
export interface FormFile {
  file: Buffer;
  /** The name the client gave the file (untrusted: for display only). */
  filename: string;
  /** The media type the client declared (untrusted: check the bytes). */
  mimeType: string;
  fields: Record<string, string>;
}

const malformed = (err: unknown) => problems.badRequest(`malformed multipart body: ${(err as Error).message}`, [{ path: 'body', message: 'malformed' }]);

/**
 * Reads a multipart/form-data body holding the file `field` (others are drained) and text fields,
 * keeping at most `limitBytes` of the file: past it `tooLarge` is the answer, once the rest of the
 * body was read and dropped so the answer reaches the client. A body that is not a form is a 415.
 */
export function readFormFile(ctx: Context, options: { field: string; limitBytes: number; tooLarge: () => HttpProblem; what: string }): Promise<FormFile> {
  if (!ctx.is('multipart/form-data')) return Promise.reject(new HttpProblem(415, `${options.what} is a multipart/form-data form`));
  return new Promise((resolve, reject) => {
    let form: busboy.Busboy;
    try {
      form = busboy({ headers: ctx.req.headers, limits: { files: 1, fields: 20, fileSize: options.limitBytes } });
    } catch (err) {
      return reject(malformed(err));
    }
    const fields: Record<string, string> = {};
    let file: { chunks: Buffer[]; filename: string; mimeType: string } | null = null;
    let failure: Error | null = null;
    form.on('field', (field, value) => (fields[field] = value));
    form.on('file', (field, stream, info) => {
      stream.on('error', () => undefined);
      if (field !== options.field) return stream.resume();
      const chunks: Buffer[] = [];
      file = { chunks, filename: info.filename ?? '', mimeType: info.mimeType ?? '' };
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('limit', () => (failure ??= options.tooLarge()));
    });
    form.on('error', (err) => reject(malformed(err)));
    form.on('close', () => {
      if (failure) return reject(failure);
      const got = file as { chunks: Buffer[]; filename: string; mimeType: string } | null;
      if (!got) return reject(problems.badRequest(`the form has no file named "${options.field}"`, [{ path: `body.${options.field}`, message: 'required' }]));
      resolve({ file: Buffer.concat(got.chunks), filename: got.filename, mimeType: got.mimeType, fields });
    });
    ctx.req.pipe(form);
  });
}
