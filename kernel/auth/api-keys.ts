import { z } from 'zod';
import type { RequestHeaders } from '../http/request-headers.ts';
import type { Contribution, Disposable, ExtensionPoint } from '../plugin-api.ts';
import { andThen, type Maybe } from '../maybe.ts';
import { HttpProblem, problems } from '../problem.ts';
import type { CapabilityInfo } from '../registry/generation.ts';
import type { ApiKeyPrincipal } from './principal.ts';

/** The one header data API keys travel in (spec §5.14); the logger blanks it. */
export const API_KEY_HEADER = 'x-api-key';
/** Longer values are refused before any authenticator sees them. */
export const MAX_API_KEY_LENGTH = 512;
/** Printable ASCII without spaces: what a key may be made of (a second X-API-Key header arrives joined by ", "). */
const KEY_TEXT = /^[\x21-\x7e]+$/;
const ORG_ID = /^\d{1,15}$/;

/** What an authenticator answers for a key it recognizes. */
export interface ApiKeyGrant {
  /** The key's id in the authenticator's own records; never the secret. */
  keyId: string | number;
  /** A name people recognize the key by (shown in the audit log). */
  name: string;
  /** The organization the key belongs to: the only one it may act in. */
  orgId: number;
  /** Capabilities the key holds in its organization; unknown and platform-wide ones are dropped. */
  capabilities: Iterable<string>;
  /** Authenticator-defined names of what the key may call (e.g. API Service endpoints); null or absent = all. */
  allowed?: Iterable<string> | null;
}

/** Where an authentication happens, for the authenticator's own logs; never the key. */
export interface ApiKeyRequest {
  requestId: string;
  ip: string;
}

/** A contribution to `kernel.api_key_authenticators`. */
export interface ApiKeyAuthenticator {
  /** Unique among authenticators (the point's key). */
  id: string;
  /** Only keys starting with it are offered to this authenticator (e.g. `dak_`); absent = every key. */
  prefix?: string;
  /**
   * The grant of a valid key, or null for a key it does not know (a 401). Keys arrive checked:
   * printable ASCII, no spaces, at most 512 characters. Must not log or echo the key.
   */
  authenticate(key: string, request: ApiKeyRequest): Promise<ApiKeyGrant | null> | ApiKeyGrant | null;
}

export const apiKeyAuthenticatorSchema = z.object({
  id: z.string().regex(/^[a-z][a-z0-9_.-]{0,63}$/, 'must be lower-case letters, digits, _ . or -, starting with a letter (at most 64)'),
  prefix: z.string().regex(/^[A-Za-z0-9_-]{1,32}$/, 'must be 1 to 32 letters, digits, _ or -').optional(),
  authenticate: z.custom<ApiKeyAuthenticator['authenticate']>((value) => typeof value === 'function', 'must be a function (key, request) => grant | null'),
});

/**
 * The kernel's extension point for data API key authenticators: a plugin contributes one with
 * `ctx.contribute(apiKeyAuthenticators, {...})`; routes with `security: 'apiKey'` then admit the
 * keys it recognizes. Without any, those routes answer 501.
 */
export const apiKeyAuthenticators: ExtensionPoint<ApiKeyAuthenticator> = {
  id: 'kernel.api_key_authenticators',
  schema: apiKeyAuthenticatorSchema,
  key: (authenticator) => authenticator.id,
};

const unauthorized = (detail: string) => new HttpProblem(401, detail);

/**
 * The installed authenticators, in the order they were contributed, and what turns an `X-API-Key`
 * header into an API key principal: the key is checked for shape, offered to the authenticators
 * whose prefix it has until one recognizes it, and the organization named by `X-Org-Id` (if any)
 * must be the key's. Refusals never repeat the key.
 */
export class ApiKeyAuthenticators {
  /** Replaced, never changed in place: a request offering its key along it meets one list throughout. */
  private installed: Contribution<ApiKeyAuthenticator>[] = [];
  /**
   * The principal made of each grant, for an authenticator that answers the same grant object while
   * the key is unchanged (it keeps its keys): made again when the catalogue or plugin differs.
   */
  private readonly principals = new WeakMap<ApiKeyGrant, { catalogue: ReadonlyMap<string, CapabilityInfo>; pluginId: string; principal: ApiKeyPrincipal }>();

  /** `isEnabled`: whether a plugin serves an organization; an authenticator's grant holds only where its plugin does. */
  constructor(private readonly isEnabled: (pluginId: string, orgId: number) => boolean | Promise<boolean>) {}

  /** The extension point's owner side: installs a contribution; the disposable withdraws exactly it. */
  accept = (contribution: Contribution<ApiKeyAuthenticator>): Disposable => {
    this.installed = [...this.installed, contribution];
    return () => {
      this.installed = this.installed.filter((installed) => installed !== contribution);
    };
  };

  /** The principal of the request's key; a value when every step answered from memory. */
  authenticate(request: ApiKeyRequest & { header: RequestHeaders }, catalogue: ReadonlyMap<string, CapabilityInfo>): Maybe<ApiKeyPrincipal> {
    if (this.installed.length === 0) throw problems.notImplemented('no data API key authenticator is installed');
    const key = request.header(API_KEY_HEADER);
    if (key === undefined || key === '') throw unauthorized('missing API key: send X-API-Key: <key>');
    if (key.length > MAX_API_KEY_LENGTH || !KEY_TEXT.test(key)) {
      throw unauthorized(`invalid API key: send one key of at most ${MAX_API_KEY_LENGTH} printable characters without spaces`);
    }
    const orgId = requestedOrganization(request.header('x-org-id'));
    return this.offer({ key, orgId, catalogue, request, installed: this.installed }, 0);
  }

  /** Offers the key to the authenticators from `from` on, whose prefix it has, until one recognizes it for an organization its plugin serves. */
  private offer(offer: KeyOffer, from: number): Maybe<ApiKeyPrincipal> {
    const { key, installed } = offer;
    for (let i = from; i < installed.length; i += 1) {
      const { value: authenticator, pluginId } = installed[i];
      if (authenticator.prefix !== undefined && !key.startsWith(authenticator.prefix)) continue;
      return andThen(authenticator.authenticate(key, offer.request), (grant) => {
        if (!grant) return this.offer(offer, i + 1);
        const principal = this.principalOf(grant, pluginId, offer.catalogue);
        return andThen(this.isEnabled(pluginId, principal.orgId), (enabled) => {
          if (!enabled) return this.offer(offer, i + 1);
          if (offer.orgId !== undefined && offer.orgId !== principal.orgId) throw problems.forbidden(`organization ${offer.orgId} does not exist or this API key does not belong to it`);
          return principal;
        });
      });
    }
    throw unauthorized('invalid API key');
  }

  private principalOf(grant: ApiKeyGrant, pluginId: string, catalogue: ReadonlyMap<string, CapabilityInfo>): ApiKeyPrincipal {
    const known = this.principals.get(grant);
    if (known && known.catalogue === catalogue && known.pluginId === pluginId) return known.principal;
    const principal = principalOf(grant, pluginId, catalogue);
    this.principals.set(grant, { catalogue, pluginId, principal });
    return principal;
  }
}

/** One key on its way through the authenticators. */
interface KeyOffer {
  key: string;
  orgId: number | undefined;
  catalogue: ReadonlyMap<string, CapabilityInfo>;
  request: ApiKeyRequest;
  installed: Contribution<ApiKeyAuthenticator>[];
}

/** X-Org-Id when given: on an API key route it may only repeat the key's organization. */
function requestedOrganization(header: string | undefined): number | undefined {
  const given = header?.trim();
  if (given === undefined || given === '') return undefined;
  if (!ORG_ID.test(given)) throw problems.badRequest('X-Org-Id must be an integer organization id', [{ path: 'headers.x-org-id', message: 'must be an integer' }]);
  return Number(given);
}

/** Frozen; the authenticator's word on capabilities is narrowed to the organization-scoped ones the catalogue knows. */
function principalOf(grant: ApiKeyGrant, authenticator: string, catalogue: ReadonlyMap<string, CapabilityInfo>): ApiKeyPrincipal {
  if (!Number.isSafeInteger(grant.orgId) || grant.orgId <= 0) throw new Error(`API key authenticator of plugin "${authenticator}" granted a key without a valid organization id`);
  const capabilities = new Set<string>();
  for (const name of grant.capabilities) if (catalogue.get(name)?.scope === 'organization') capabilities.add(name);
  return Object.freeze({
    kind: 'api_key',
    keyId: String(grant.keyId),
    name: grant.name,
    orgId: grant.orgId,
    authenticator,
    capabilities,
    allowed: grant.allowed == null ? null : new Set(grant.allowed),
  });
}
