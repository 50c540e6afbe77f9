import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { guardedFetch } from './outbound-fetch.ts';

/** The target is in a private, loopback or link-local range and not listed in OUTBOUND_ALLOWED_HOSTS. */
export class OutboundRefusedError extends Error {}
/** The target could not be reached (DNS, connection, timeout). */
export class OutboundFailedError extends Error {}

export interface OutboundResponse {
  status: number;
  contentType: string;
  text: string;
  /** The body parsed as JSON when it is JSON, else undefined. */
  json: unknown;
}

const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Ranges no outbound call may reach unless allowed: the machine itself, its private networks, and
 * the special-purpose ranges (IANA's registries) that are not the public internet: IETF protocol
 * assignments, benchmarking, documentation, reserved and broadcast; in IPv6 also the forms that
 * carry an IPv4 address (IPv4-compatible, NAT64, 6to4), which could reach a private one.
 */
function privateRanges(): net.BlockList {
  const list = new net.BlockList();
  const ipv4 = [['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4]] as const;
  for (const [address, prefix] of ipv4) list.addSubnet(address, prefix, 'ipv4');
  const ipv6 = [['::', 96], ['::1', 128], ['64:ff9b::', 96], ['64:ff9b:1::', 48], ['100::', 64], ['2001:db8::', 32], ['2002::', 16], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8]] as const;
  for (const [address, prefix] of ipv6) list.addSubnet(address, prefix, 'ipv6');
  return list;
}

/**
 * Outbound HTTP for connectors (spec §6: no retry). Every address a host name resolves to is
 * checked in the connection's own DNS lookup, so a name cannot resolve to a public address when
 * checked and to a private one when connected.
 */
/** Names that do not exist (ENOTFOUND, ENODATA): the connector's configuration is wrong, a 422. A lookup that failed (EAI_AGAIN…): the peer's side, a 502. */
const MISSING_NAME = new Set(['ENOTFOUND', 'ENODATA']);

function lookupFailure(host: string, err: NodeJS.ErrnoException): Error {
  if (MISSING_NAME.has(String(err.code))) return new OutboundRefusedError(`${host} does not resolve: no such host name`);
  return new OutboundFailedError(`${host} could not be resolved: ${err.code ?? 'lookup failed'}`);
}

export class OutboundHttp {
  private readonly denied = privateRanges();
  private readonly allowedAddresses = new net.BlockList();
  private readonly allowedHosts = new Set<string>();

  constructor(
    allowed: readonly string[],
    private readonly timeoutMs: number,
  ) {
    for (const entry of allowed) {
      const [address, prefix] = entry.split('/');
      const family = net.isIP(address);
      if (family === 0) this.allowedHosts.add(entry.toLowerCase());
      else if (prefix !== undefined) this.allowedAddresses.addSubnet(address, Number(prefix), family === 6 ? 'ipv6' : 'ipv4');
      else this.allowedAddresses.addAddress(address, family === 6 ? 'ipv6' : 'ipv4');
    }
  }

  /** Why an address may not be called, or null. */
  private refusal(host: string, address: string): string | null {
    const family: 'ipv4' | 'ipv6' = net.isIP(address) === 6 ? 'ipv6' : 'ipv4';
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
    const [checked, checkedFamily] = mapped ? [mapped, 'ipv4' as const] : [address, family];
    if (!this.denied.check(checked, checkedFamily)) return null;
    if (this.allowedHosts.has(host.toLowerCase()) || this.allowedAddresses.check(checked, checkedFamily)) return null;
    return `${host} resolves to ${address}, a private, loopback or link-local address (allow it in OUTBOUND_ALLOWED_HOSTS)`;
  }

  /**
   * The addresses a host may be reached at, refusing a private, loopback or link-local one unless
   * allowed: for connections that are not HTTP (databases). Connect to the answer, not the name.
   */
  async resolve(target: string): Promise<string[]> {
    const host = target.replace(/^\[(.*)\]$/, '$1'); // an IPv6 literal as written in a URL: [::1]
    let addresses: string[];
    try {
      addresses = net.isIP(host) ? [host] : (await dns.promises.lookup(host, { all: true })).map((a) => a.address);
    } catch (err) {
      throw lookupFailure(host, err as NodeJS.ErrnoException);
    }
    const reason = addresses.map((address) => this.refusal(host, address)).find(Boolean);
    if (reason) throw new OutboundRefusedError(reason);
    return addresses;
  }

  /**
   * An http(s) URL whose host, written as an address, may be called: what `request` checks before
   * it connects (a host name is checked as it resolves). OutboundRefusedError says why not.
   */
  httpTarget(target: string): URL {
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      throw new OutboundRefusedError(`${target} is not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OutboundRefusedError(`only http and https targets are allowed, not ${url.protocol}`);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (net.isIP(host)) {
      const reason = this.refusal(host, host);
      if (reason) throw new OutboundRefusedError(reason);
    }
    return url;
  }

  /** The URL `request` would call, checked now as it would be then (its host name resolved too): for a target saved to be called later. */
  async checkTarget(target: string): Promise<URL> {
    const url = this.httpTarget(target);
    await this.resolve(url.hostname);
    return url;
  }

  /** The DNS lookup of every outbound connection: each address a name resolves to is checked as it is connected to. */
  private readonly lookup: net.LookupFunction = (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(lookupFailure(hostname, err), '', 0);
      const list = addresses as dns.LookupAddress[];
      const reason = list.map((a) => this.refusal(hostname, a.address)).find(Boolean);
      if (reason) return callback(new OutboundRefusedError(reason), '', 0);
      if ((options as { all?: boolean }).all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, list);
      callback(null, list[0].address, list[0].family);
    });
  };

  /**
   * A WHATWG `fetch` behind the same guard, for clients that take one (the LLM providers' official
   * SDKs): the target is checked as `request` checks it, every address as it is connected to. The
   * answer streams (Server-Sent Events pass through as they arrive) and is cut at `maxBodyBytes`;
   * the caller's AbortSignal ends the call, and `idleMs` without a byte from the peer fails it.
   */
  fetchWith(options: { maxBodyBytes: number; idleMs: number }): typeof fetch {
    return (input, init) => guardedFetch(this.httpTarget(String(input instanceof Request ? input.url : input)), init ?? {}, this.lookup, options);
  }

  async request(target: string, init: { method: string; headers?: Record<string, string>; body?: string }): Promise<OutboundResponse> {
    const url = this.httpTarget(target);
    const lookup = this.lookup;
    const client = url.protocol === 'https:' ? https : http;
    return new Promise<OutboundResponse>((resolveCall, rejectCall) => {
      // The limit covers the whole call: the socket's idle timeout alone lets a peer that answers
      // one byte at a time hold the call (and the caller's request) forever.
      const deadline = setTimeout(() => request.destroy(new OutboundFailedError(`${url.host} did not answer within ${this.timeoutMs} ms`)), this.timeoutMs);
      const resolve = (value: OutboundResponse) => {
        clearTimeout(deadline);
        resolveCall(value);
      };
      const reject = (err: Error) => {
        clearTimeout(deadline);
        rejectCall(err);
      };
      const request = client.request(url, { method: init.method, headers: init.headers, lookup, timeout: this.timeoutMs }, (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_BODY_BYTES) request.destroy(new OutboundFailedError(`the answer of ${url.host} is larger than ${MAX_BODY_BYTES} bytes`));
          else chunks.push(chunk);
        });
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const contentType = String(response.headers['content-type'] ?? '');
          let json: unknown;
          if (/json/.test(contentType)) {
            try {
              json = JSON.parse(text);
            } catch {
              json = undefined;
            }
          }
          resolve({ status: response.statusCode ?? 0, contentType, text, json });
        });
      });
      request.on('timeout', () => request.destroy(new OutboundFailedError(`${url.host} did not answer within ${this.timeoutMs} ms`)));
      request.on('error', (err) => reject(err instanceof OutboundRefusedError || err instanceof OutboundFailedError ? err : new OutboundFailedError(`${url.host} could not be reached: ${err.message}`)));
      if (init.body !== undefined) request.write(init.body);
      request.end();
    });
  }
}
