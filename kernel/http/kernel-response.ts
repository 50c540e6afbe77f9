import http from 'node:http';
import { API_HEADERS } from './security-headers.ts';

/** The names of the headers every answer carries, in lower case. */
const KERNEL_HEADER_NAMES: ReadonlySet<string> = new Set([...API_HEADERS.filter((_, i) => i % 2 === 0), 'x-request-id']);

type Headers = http.OutgoingHttpHeaders | readonly http.OutgoingHttpHeader[] | undefined;

/**
 * How many of the first responses are kept alive while V8 sizes this class's instances: it sizes
 * them at about the seventh construction, from the shapes of the earlier instances still alive.
 */
const SIZING_WITNESSES = 10;

/**
 * The kernel's answer to every request: Node's response, which adds the headers every answer
 * carries (the request id and the API security headers) as its head is written, whichever way it
 * is written (Koa's, an error's, a stream's, a route's own) — except a header the answer set itself
 * (the documentation pages' own policy, say).
 *
 * Why at the head, not at the start of the request: Node validates, lower-cases and files every
 * header set one by one, then walks them again to write the head. An answer that gives its head in
 * one list (a cached API Service answer: `writeHead(status, [name, value, …])`) and set nothing
 * before is written from one list, the kernel's headers appended, validated once as it is written
 * and never filed: setting them one by one was about 5 % of the instructions of a cached answer.
 */
export class KernelResponse extends http.ServerResponse {
  /**
   * The first responses, kept until V8 has sized the instances of this class. V8 gives a class's
   * instances room for as many properties as the instances made so far hold when the seventh is
   * made. A response ends up with about 45 properties, most set by Node outside the constructor. If
   * the first responses are gone by then (a full GC while a new server sits idle between its first
   * requests), V8 sizes the instances for none; each property then lives out of the object, and
   * past twelve of them Node's keyed stores (`res[kUniqueHeaders] = …`) turn every response into a
   * dictionary, which made every answer of the process about a third slower.
   */
  private static sizingWitnesses: KernelResponse[] | undefined = [];

  /** This request's id (request-context.ts), answered as X-Request-Id. */
  requestId = '';
  /** Whether a header was set one by one: then the kernel's are set the same way, where the answer did not set its own. */
  private headersSetOneByOne = false;

  constructor(...args: ConstructorParameters<typeof http.ServerResponse>) {
    super(...args);
    const witnesses = KernelResponse.sizingWitnesses;
    if (witnesses && witnesses.push(this) >= SIZING_WITNESSES) KernelResponse.sizingWitnesses = undefined;
  }

  override setHeader(name: string, value: number | string | readonly string[]): this {
    this.headersSetOneByOne = true;
    return super.setHeader(name, value);
  }

  override appendHeader(name: string, value: string | readonly string[]): this {
    this.headersSetOneByOne = true;
    return super.appendHeader(name, value);
  }

  override writeHead(statusCode: number, reasonOrHeaders?: string | Headers, givenHeaders?: Headers): this {
    const reason = typeof reasonOrHeaders === 'string' ? reasonOrHeaders : undefined;
    const headers = typeof reasonOrHeaders === 'string' ? givenHeaders : reasonOrHeaders;
    if (this.headersSent) return super.writeHead(statusCode, reason, headers as never); // Node's own error
    if (!this.headersSetOneByOne && (headers === undefined || isFlatList(headers))) return super.writeHead(statusCode, reason, this.kernelHeaders(headers ?? []));
    for (let i = 0; i < API_HEADERS.length; i += 2) if (!this.hasHeader(API_HEADERS[i]) && !names(headers, API_HEADERS[i])) super.setHeader(API_HEADERS[i], API_HEADERS[i + 1]);
    if (!this.hasHeader('x-request-id') && !names(headers, 'x-request-id')) super.setHeader('x-request-id', this.requestId);
    return super.writeHead(statusCode, reason, headers as never);
  }

  /** The answer's flat header list with the kernel's appended, bar those it names itself. */
  private kernelHeaders(given: readonly http.OutgoingHttpHeader[]): http.OutgoingHttpHeader[] {
    let own: string[] | undefined;
    for (let i = 0; i < given.length; i += 2) {
      const name = String(given[i]).toLowerCase();
      if (KERNEL_HEADER_NAMES.has(name)) (own ??= []).push(name);
    }
    const all = given.slice();
    for (let i = 0; i < API_HEADERS.length; i += 2) if (!own?.includes(API_HEADERS[i])) all.push(API_HEADERS[i], API_HEADERS[i + 1]);
    if (!own?.includes('x-request-id')) all.push('x-request-id', this.requestId);
    return all;
  }
}

/** A head given as one flat list of names and values (not a list of pairs, nor an object). */
const isFlatList = (headers: NonNullable<Headers>): headers is readonly http.OutgoingHttpHeader[] => Array.isArray(headers) && !Array.isArray(headers[0]);

/** Whether a head given to writeHead (a flat list, a list of pairs or an object) names the lower-case `name`. */
function names(headers: Headers, name: string): boolean {
  if (headers === undefined) return false;
  if (!Array.isArray(headers)) return Object.keys(headers).some((key) => key.length === name.length && key.toLowerCase() === name);
  const pairs = Array.isArray(headers[0]);
  const step = pairs ? 1 : 2;
  for (let i = 0; i < headers.length; i += step) {
    const key = String(pairs ? (headers[i] as unknown as string[])[0] : headers[i]);
    if (key.length === name.length && key.toLowerCase() === name) return true;
  }
  return false;
}
