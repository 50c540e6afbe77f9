import type { Context } from 'koa';
import type { ZodObject, ZodType, z } from 'zod';
import type { Logger } from 'pino';
import type { RequestAudit } from './audit/audit-service.ts';
import type { ApiKeyPrincipal, UserPrincipal } from './auth/principal.ts';

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
   * media type (415 otherwise). Described in OpenAPI as binary content of these types, unless
   * `schemas` describes a type's body (a multipart form's fields and their encoding).
   */
  stream?: { contentTypes: string[]; description: string; schemas?: Record<string, StreamedMediaType> };
}

/** One media type of a streamed body: its schema and, for a form, how each field is encoded (OpenAPI Encoding Object). */
export interface StreamedMediaType {
  schema: ZodType;
  encoding?: Record<string, { contentType?: string; headers?: Record<string, unknown> }>;
}

export interface RouteResponse {
  description: string;
  /** JSON body schema; omit for empty answers (204) or non-JSON bodies. */
  schema?: ZodType;
  /**
   * The body's schema per media type, for an answer that is not (only) JSON: e.g. an export that
   * answers `text/csv` or `application/json` as asked. Used instead of `schema`.
   */
  content?: Record<string, ZodType>;
}

export type { Principal, UserPrincipal, ApiKeyPrincipal, RunPrincipal } from './auth/principal.ts';

/** The caller a route's security admits: a user for `bearer`, a data API key for `apiKey`, nobody for `none`. */
export type PrincipalFor<S extends RouteSecurity> = S extends 'bearer' ? UserPrincipal & { readonly via: 'jwt' | 'pat' } : S extends 'apiKey' ? ApiKeyPrincipal : null;

/**
 * The current organization a route's handler gets: always one on org-scoped routes and on `apiKey`
 * routes (the key's), none on `none` routes, else one when the caller has it.
 */
export type OrgIdFor<S extends RouteSecurity, O extends boolean> = S extends 'none' ? null : S extends 'apiKey' ? number : O extends true ? number : number | null;

type Parsed<S> = S extends ZodType ? z.output<S> : undefined;

export interface RouteInput<R extends RouteRequestSchemas, S extends RouteSecurity = RouteSecurity, O extends boolean = boolean> {
  params: Parsed<R['params']>;
  query: Parsed<R['query']>;
  headers: Parsed<R['headers']>;
  body: Parsed<R['body']>;
  /** The caller, of the kind the route's security admits. */
  principal: PrincipalFor<S>;
  /** The current organization (X-Org-Id, else the user's default; an API key's own); a number on org-scoped routes. */
  orgId: OrgIdFor<S, O>;
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
  private bytes: string | undefined;
  constructor(value: unknown) {
    this.text = JSON.stringify(value);
  }

  /** The text's length in UTF-8 bytes, as a Content-Length: counted once, however often it is answered. */
  get contentLength(): string {
    return (this.bytes ??= String(Buffer.byteLength(this.text)));
  }
}

/**
 * A route, declared once: the kernel derives request validation, the permission and tenancy
 * checks and the OpenAPI operation from this one object.
 */
export interface RouteDefinition<R extends RouteRequestSchemas = RouteRequestSchemas, S extends RouteSecurity = RouteSecurity, O extends boolean = boolean> {
  method: HttpMethod;
  /** Path relative to the plugin's prefix, OpenAPI style: `/{id}/reload`; `''` is the prefix itself. */
  path: string;
  /**
   * A page a person opens in a browser rather than an API operation: mounted under the manifest's
   * `router.pages` prefix (under `/p`) instead of its `/api` prefix. Its answer sets its own CSP.
   */
  page?: boolean;
  /**
   * The path itself is a secret (a share link's token): the request log names the route's template
   * (`/p/dashboards/{token}`) instead of the path.
   */
  secretPath?: boolean;
  summary: string;
  description?: string;
  security: S;
  /** Capability the caller needs (checked after authentication). */
  capability?: string;
  /** The route works inside the current organization (`X-Org-Id`). */
  orgScoped?: O;
  /**
   * Open to a user who must still choose a password (`must_reset_password`) when
   * REQUIRE_PASSWORD_CHANGE is on: only what a client needs to get them through the change.
   */
  allowDuringPasswordChange?: boolean;
  request?: R;
  responses: Record<number, RouteResponse>;
  handler(input: RouteInput<R, S, O>): Promise<unknown> | unknown;
}

/**
 * Identity function that lets TypeScript infer the handler's input from the route: the schemas
 * type params, query, headers and body; `security` and `orgScoped` type `principal` and `orgId`.
 * The result is `NoInfer`: a plugin's `routes` list (routes of every kind) must not feed its wider
 * types back into the inference, which would widen `orgScoped: true` to `boolean`.
 */
export function defineRoute<R extends RouteRequestSchemas, S extends RouteSecurity, O extends boolean = false>(route: RouteDefinition<R, S, O>): NoInfer<RouteDefinition<R, S, O>> {
  return route;
}
