import type { Storage } from '../../storage/index.ts';
import { IDENTITY_COUNTER } from '../migrations/index.ts';
import type { Group, GroupDirectory } from './groups.ts';
import type { Organization, OrganizationDirectory } from './organizations.ts';
import type { PersonalAccessTokens, ResolvedToken } from './tokens.ts';
import { toPublicUser, type PublicUser, type UserDirectory } from './users.ts';

/** Entries kept at most; the oldest go first. Each is one user's row, memberships, groups or token. */
const CAPACITY = 20_000;

/**
 * What every request needs to know about its caller (user, organizations, groups, token), read
 * through from the directories and kept until identity data changes. The database bumps the
 * identity change counter in the same transaction as any change to those tables, whoever makes it
 * (this instance, another one, a console), and every request checks the counter before it reads:
 * a deactivated user, a removed membership or a revoked token is refused on the very next request
 * on every instance, while unchanged identity costs no query beyond the counter's.
 */
export class IdentitySnapshot {
  private counter: number | undefined;
  // Loads in flight are kept too, so concurrent misses share one query.
  private readonly entries = new Map<string, Promise<unknown>>();

  constructor(
    private readonly storage: Storage,
    private readonly sources: { users: UserDirectory; organizations: OrganizationDirectory; groups: GroupDirectory; tokens: PersonalAccessTokens },
  ) {}

  /** Forgets everything when identity changed since the entries were read. Once per request, first. */
  async refresh(): Promise<void> {
    const counter = await this.storage.changeCounter(IDENTITY_COUNTER);
    if (counter === this.counter) return;
    // Whatever was read or is being read was read before this counter value: none of it is kept.
    this.entries.clear();
    this.counter = counter;
  }

  user(id: number): Promise<PublicUser | undefined> {
    return this.read(`user:${id}`, async () => {
      const row = await this.sources.users.get(id);
      return row && toPublicUser(row);
    });
  }

  /** The organizations the user belongs to, by id. */
  organizationsOf(userId: number): Promise<Organization[]> {
    return this.read(`orgs:${userId}`, () => this.sources.organizations.list(userId));
  }

  async isMember(orgId: number, userId: number): Promise<boolean> {
    return (await this.organizationsOf(userId)).some((org) => org.id === orgId);
  }

  /** The user's groups in the organization, with their capabilities. */
  groupsOf(userId: number, orgId: number): Promise<Group[]> {
    return this.read(`groups:${userId}:${orgId}`, () => this.sources.groups.list(orgId, userId));
  }

  /** The token row stored under an HMAC of its secret. */
  token(hmac: string): Promise<ResolvedToken | undefined> {
    return this.read(`token:${hmac}`, () => this.sources.tokens.findByHmac(hmac));
  }

  private read<T>(key: string, load: () => Promise<T>): Promise<T> {
    const cached = this.entries.get(key);
    if (cached) return cached as Promise<T>;
    const loading = load();
    if (this.entries.size >= CAPACITY) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, loading);
    loading.catch(() => {
      if (this.entries.get(key) === loading) this.entries.delete(key);
    });
    return loading;
  }
}
