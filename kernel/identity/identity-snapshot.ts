import type { Storage } from '../../storage/index.ts';
import { andThen, type Maybe } from '../maybe.ts';
import { IDENTITY_COUNTER } from '../migrations/index.ts';
import type { Group, GroupDirectory } from './groups.ts';
import type { Organization, OrganizationDirectory } from './organizations.ts';
import type { PersonalAccessTokens, ResolvedToken } from './tokens.ts';
import { toPublicUser, type PublicUser, type UserDirectory } from './users.ts';

/** Entries kept at most; the oldest go first. Each is one user's row, memberships, groups or token. */
const CAPACITY = 20_000;

/** A value already read, or the read in flight (concurrent misses share one query). */
type Entry = { value: unknown } | { pending: Promise<unknown> };

/** A value computed from identity data and a `basis` it also depends on (e.g. a capability catalogue). */
interface Derived {
  basis: object;
  value: unknown;
}


function includesOrganization(orgs: Organization[], orgId: number): boolean {
  for (const org of orgs) if (org.id === orgId) return true;
  return false;
}

/**
 * What every request needs to know about its caller (user, organizations, groups, token), read
 * through from the directories and kept until identity data changes. The database bumps the
 * identity change counter in the same transaction as any change to those tables, whoever makes it
 * (this instance, another one, a console), and every request checks the counter before it reads:
 * a deactivated user, a removed membership or a revoked token is refused on the very next request
 * on every instance, while unchanged identity costs no query beyond the counter's.
 *
 * Reads answer values, not promises, once cached: the request path runs on every request, and each
 * promise layer there costs more than the lookup it wraps.
 */
export class IdentitySnapshot {
  private counter: number | undefined;
  private readonly entries = new Map<string, Entry>();
  private readonly derivations = new Map<string, Derived>();
  /** Resolved callers by credential, then by scope. */
  private readonly callers = new Map<string, Map<string, Derived>>();

  constructor(
    private readonly storage: Storage,
    private readonly sources: { users: UserDirectory; organizations: OrganizationDirectory; groups: GroupDirectory; tokens: PersonalAccessTokens },
  ) {}

  /** Forgets everything when identity changed since the entries were read. Once per request, first. */
  refresh(): Maybe<void> {
    return andThen(this.storage.changeCounter(IDENTITY_COUNTER), this.settle);
  }

  user(id: number): Maybe<PublicUser | undefined> {
    return this.read(`user:${id}`, async () => {
      const row = await this.sources.users.get(id);
      return row && toPublicUser(row);
    });
  }

  /** The organizations the user belongs to, by id. */
  organizationsOf(userId: number): Maybe<Organization[]> {
    return this.read(`orgs:${userId}`, () => this.sources.organizations.list(userId));
  }

  isMember(orgId: number, userId: number): Maybe<boolean> {
    const orgs = this.organizationsOf(userId);
    return orgs instanceof Promise ? orgs.then((list) => includesOrganization(list, orgId)) : includesOrganization(orgs, orgId);
  }

  /** The user's groups in the organization, with their capabilities. */
  groupsOf(userId: number, orgId: number): Maybe<Group[]> {
    return this.read(`groups:${userId}:${orgId}`, () => this.sources.groups.list(orgId, userId));
  }

  /** The token row stored under an HMAC of its secret. */
  token(hmac: string): Maybe<ResolvedToken | undefined> {
    return this.read(`token:${hmac}`, () => this.sources.tokens.findByHmac(hmac));
  }

  /**
   * A value computed from what this snapshot holds (and from `basis`), kept until identity changes
   * or another basis is given: at once when known, else once computed. `compute` must read identity
   * through this snapshot only.
   */
  derived<T>(key: string, basis: object, compute: () => Promise<T>): Maybe<T> {
    const known = this.derivations.get(key);
    if (known?.basis === basis) return known.value as T;
    const counter = this.counter;
    return compute().then((value) => {
      if (this.counter === counter) {
        if (this.derivations.size >= CAPACITY) this.derivations.delete(this.derivations.keys().next().value!);
        this.derivations.set(key, { basis, value });
      }
      return value;
    });
  }

  /**
   * The caller resolved earlier from this credential in this `scope` (organization header and
   * route kind), if identity has not changed since and `basis` is the same. Keyed by credential
   * first: the credential string of a request is hashed once, and no key is built per request.
   */
  knownCaller<T>(credential: string, scope: string, basis: object): T | undefined {
    const known = this.callers.get(credential)?.get(scope);
    return known?.basis === basis ? (known.value as T) : undefined;
  }

  /** Keeps a resolved caller, unless identity changed after `version` (see `version`), when the caller was read. */
  keepCaller(credential: string, scope: string, basis: object, caller: unknown, version: number | undefined): void {
    if (version !== this.counter) return;
    let scopes = this.callers.get(credential);
    if (!scopes) {
      if (this.callers.size >= CAPACITY) this.callers.delete(this.callers.keys().next().value!);
      this.callers.set(credential, (scopes = new Map()));
    }
    scopes.set(scope, { basis, value: caller });
  }

  /** The identity change counter the entries are valid for; read it before resolving a caller. */
  get version(): number | undefined {
    return this.counter;
  }

  // A bound field, not a method: refresh() hands it on without making a closure per request.
  private readonly settle = (counter: number): void => {
    if (counter === this.counter) return;
    // Whatever was read or is being read was read before this counter value: none of it is kept.
    this.entries.clear();
    this.derivations.clear();
    this.callers.clear();
    this.counter = counter;
  };

  private read<T>(key: string, load: () => Promise<T>): Maybe<T> {
    const entry = this.entries.get(key);
    if (entry) return 'value' in entry ? (entry.value as T) : (entry.pending as Promise<T>);
    const pending = load();
    const placed: Entry = { pending };
    if (this.entries.size >= CAPACITY) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, placed);
    pending.then(
      // Kept only if no refresh dropped the entry while it was being read.
      (value) => this.entries.get(key) === placed && this.entries.set(key, { value }),
      () => this.entries.get(key) === placed && this.entries.delete(key),
    );
    return pending;
  }
}
