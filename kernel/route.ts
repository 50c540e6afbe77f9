import type { Context } from 'koa';
import type { ZodObject, ZodType, z } from 'zod';
import type { Logger } from 'pino';
import type { RequestAudit } from './audit/audit-service.ts';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** How a caller proves who it is: nothing, a bearer JWT or PAT, or a data API key. */
export type RouteSecurity = 'none' | 'bearer' | 'apiKey';

export interface RouteRequestSchemas {
  params?: ZodObject;
  query?: ZodObject;
  headers?: ZodObject;
  body?: ZodType;
  /** Media types accepted for the (JSON-shaped) body; default `application/json`. */
  bodyTypes?: string[];
  /** Body size limit for this route (e.g. `16kb`); default the BODY_LIMIT setting. */
  bodyLimit?: string;
  /**
   * A body the handler streams itself (uploads): not parsed by the kernel, which only checks the
   * media type (415 otherwise). Described in OpenAPI as binary content of these types.
   */
  stream?: { contentTypes: string[]; description: string };
}

export interface RouteResponse {
  description: string;
  /** JSON body schema; omit for empty answers (204) or non-JSON bodies. */
  schema?: ZodType;
  /** Media type of the body when it is not JSON (e.g. `text/csv`). */
  contentType?: string;
}

/** The authenticated caller, resolved by the kernel for every request to a secured route. */
export interface Principal {
  userId: number;
  username: string;
  role: string;
  isPlatformAdmin: boolean;
  defaultOrgId: number | null;
  /** Effective capabilities of this request (role baseline, groups, token scopes). */
  capabilities: ReadonlySet<string>;
  via: 'jwt' | 'pat';
  /** The personal access token used, if any. */
  tokenId: number | null;
  /** A scoped token's scopes; null = the owner's full permissions. */
  scopes: ReadonlySet<string> | null;
}

type Parsed<S> = S extends ZodType ? z.output<S> : undefined;

export interface RouteInput<R extends RouteRequestSchemas> {
  params: Parsed<R['params']>;
  query: Parsed<R['query']>;
  headers: Parsed<R['headers']>;
  body: Parsed<R['body']>;
  /** Present on every route whose security is not `none`. */
  principal: Principal | null;
  /** The current organization (X-Org-Id, else the user's default); never null on org-scoped routes. */
  orgId: number | null;
  requestId: string;
  log: Logger;
  /** The audit log on behalf of this request (actor, organization, address and request id filled in). */
  audit: RequestAudit;
  /** The Koa context, for the rare route that must stream. */
  koa: Context;
}

const REPLY_BRAND = Symbol.for('platform.route-reply');

export interface Reply {
  readonly [REPLY_BRAND]: true;
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** An answer with an explicit status (and headers); a handler returning a plain value gets the route's first 2xx. */
export function reply(status: number, body?: unknown, headers?: Record<string, string>): Reply {
  return { [REPLY_BRAND]: true, status, body, headers };
}

export function isReply(value: unknown): value is Reply {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[REPLY_BRAND] === true;
}

/**
 * A JSON answer serialized ahead of time: a handler that gives the same answer to many requests
 * (kept until its inputs change) keeps the text instead of having it serialized for each one.
 */
export class JsonText {
  readonly text: string;
  constructor(value: unknown) {
    this.text = JSON.stringify(value);
  }
}

/**
 * A route, declared once: the kernel derives request validation, the permission and tenancy
 * checks and the OpenAPI operation from this one object.
 */
export interface RouteDefinition<R extends RouteRequestSchemas = RouteRequestSchemas> {
  method: HttpMethod;
  /** Path relative to the plugin's prefix, OpenAPI style: `/{id}/reload`; `''` is the prefix itself. */
  path: string;
  summary: string;
  description?: string;
  security: RouteSecurity;
  /** Capability the caller needs (checked after authentication). */
  capability?: string;
  /** The route works inside the current organization (`X-Org-Id`). */
  orgScoped?: boolean;
  request?: R;
  responses: Record<number, RouteResponse>;
  handler(input: RouteInput<R>): Promise<unknown> | unknown;
}

/** Identity function that lets TypeScript infer the handler's input from the schemas. */
export function defineRoute<R extends RouteRequestSchemas>(route: RouteDefinition<R>): RouteDefinition<R> {
  return route;
}
