import type { Readable } from 'node:stream';
import busboy from 'busboy';
import type { Context } from 'koa';
import { problems } from '../../kernel/plugin-api.ts';

export const UPLOAD_TYPES = ['text/csv', 'application/csv', 'multipart/form-data'];

/**
 * The uploaded file as a stream: the request body itself for text/csv, or the `file` field of a
 * multipart form (streamed by busboy, never buffered whole).
 */
export function uploadedFile(ctx: Context): Promise<Readable> {
  if (!ctx.is('multipart/form-data')) return Promise.resolve(ctx.req);
  return new Promise((resolve, reject) => {
    let found = false;
    const form = busboy({ headers: ctx.req.headers, limits: { files: 1 } });
    form.on('file', (field, stream) => {
      if (field !== 'file' || found) {
        stream.resume();
        return;
      }
      found = true;
      resolve(stream);
    });
    form.on('error', (err) => reject(problems.badRequest(`malformed multipart body: ${(err as Error).message}`)));
    form.on('close', () => {
      if (!found) reject(problems.badRequest('the multipart form has no field named "file"', [{ path: 'body.file', message: 'required' }]));
    });
    ctx.req.pipe(form);
  });
}
