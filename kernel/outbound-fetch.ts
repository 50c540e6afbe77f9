import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import { Readable, Transform } from 'node:stream';
import { OutboundFailedError } from './outbound.ts';

/** A request body as the SDKs send one: text or bytes (JSON, a form already encoded). */
function bodyBytes(body: RequestInit['body']): Buffer | undefined {
  if (body === undefined || body === null) return undefined;
  if (typeof body === 'string') return Buffer.from(body, 'utf8');
  if (body instanceof URLSearchParams) return Buffer.from(body.toString(), 'utf8');
  if (body instanceof ArrayBuffer) return Buffer.from(body);
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  throw new TypeError('the outbound fetch sends text or bytes only (not a stream, a Blob or a FormData)');
}

function headerRecord(headers: RequestInit['headers']): Record<string, string> {
  const record: Record<string, string> = {};
  new Headers(headers).forEach((value, name) => (record[name] = value));
  return record;
}

/**
 * One `fetch` over Node's http client with the guard's DNS lookup: the answer's body is a web
 * stream fed as bytes arrive, cut (with an error) past `maxBodyBytes`, failed after `idleMs`
 * without a byte, and ended by the caller's AbortSignal.
 */
export function guardedFetch(url: URL, init: RequestInit, lookup: net.LookupFunction, limits: { maxBodyBytes: number; idleMs: number }): Promise<Response> {
  const client = url.protocol === 'https:' ? https : http;
  const body = bodyBytes(init.body);
  const signal = init.signal ?? undefined;
  return new Promise<Response>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const headers = headerRecord(init.headers);
    if (body) headers['content-length'] = String(body.length);
    const request = client.request(url, { method: init.method ?? 'GET', headers, lookup, timeout: limits.idleMs }, (response) => {
      let size = 0;
      const capped = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          size += chunk.length;
          if (size > limits.maxBodyBytes) return done(new OutboundFailedError(`the answer of ${url.host} is larger than ${limits.maxBodyBytes} bytes`));
          done(null, chunk);
        },
      });
      response.on('error', (err) => capped.destroy(err));
      response.pipe(capped);
      const answerHeaders = new Headers();
      for (const [name, value] of Object.entries(response.headers)) {
        if (value !== undefined) answerHeaders.set(name, Array.isArray(value) ? value.join(', ') : value);
      }
      const status = response.statusCode ?? 502;
      // A status without a body (204, 304) takes none: Response refuses one.
      const stream = status === 204 || status === 304 ? null : (Readable.toWeb(capped) as ReadableStream<Uint8Array>);
      resolve(new Response(stream, { status, statusText: response.statusMessage, headers: answerHeaders }));
    });
    const abort = () => request.destroy(signal?.reason instanceof Error ? signal.reason : new DOMException('the call was aborted', 'AbortError'));
    signal?.addEventListener('abort', abort, { once: true });
    request.on('close', () => signal?.removeEventListener('abort', abort));
    request.on('timeout', () => request.destroy(new OutboundFailedError(`${url.host} sent nothing for ${limits.idleMs} ms`)));
    request.on('error', (err) => reject(err));
    request.end(body);
  });
}
