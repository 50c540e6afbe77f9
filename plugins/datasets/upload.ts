import type { Readable } from 'node:stream';
import busboy from 'busboy';
import type { Context } from 'koa';
import { z } from 'zod';
import { problems, type StreamedMediaType } from '../../kernel/plugin-api.ts';

export const UPLOAD_TYPES = ['text/csv', 'application/csv', 'multipart/form-data'];

const csvFile = z.string().meta({ format: 'binary', description: 'A CSV file with a header line (UTF-8)' });

/** How each upload type is described: the CSV itself, or a form whose `file` field carries it (other fields are ignored). */
export const UPLOAD_SCHEMAS: Record<string, StreamedMediaType> = {
  'text/csv': { schema: csvFile },
  'application/csv': { schema: csvFile },
  'multipart/form-data': { schema: z.object({ file: csvFile }), encoding: { file: { contentType: 'text/csv, application/octet-stream' } } },
};

/** busboy's reason (`Unexpected end of form`: the closing boundary never came), said about the body. */
const malformed = (err: Error) => problems.badRequest(`malformed multipart body: ${err.message}`, [{ path: 'body', message: err.message }]);

/**
 * The uploaded file as a stream: the request body itself for text/csv, or the `file` field of a
 * multipart form (streamed by busboy, never buffered whole). A form that breaks off destroys the
 * file stream with busboy's error, which the reader answers as a 400 (`readCsv`).
 */
export function uploadedFile(ctx: Context): Promise<Readable> {
  if (!ctx.is('multipart/form-data')) return Promise.resolve(ctx.req);
  return new Promise((resolve, reject) => {
    let found = false;
    let form: busboy.Busboy;
    try {
      form = busboy({ headers: ctx.req.headers, limits: { files: 1 } });
    } catch (err) {
      return reject(malformed(err as Error)); // no boundary in the content type
    }
    form.on('file', (field, stream) => {
      // A form that breaks off destroys the part's stream with its error, possibly before the reader
      // listens: an unheard 'error' would end the process. The reader sees it through `errored`.
      stream.on('error', () => undefined);
      if (field !== 'file' || found) {
        stream.resume();
        return;
      }
      found = true;
      resolve(stream);
    });
    form.on('error', (err) => reject(malformed(err as Error)));
    form.on('close', () => {
      if (!found) reject(problems.badRequest('the multipart form has no field named "file"', [{ path: 'body.file', message: 'required' }]));
    });
    // A client gone mid-upload never ends the form: without this, the load would wait for the rest forever.
    ctx.req.once('close', () => {
      if (!ctx.req.complete) form.destroy(new Error('the connection closed before the end of the form'));
    });
    ctx.req.pipe(form);
  });
}
