import crypto from 'node:crypto';
import type { Kysely } from 'kysely';
import type { StoredActor } from '../../kernel/plugin-api.ts';
import type { Storage } from '../../storage/index.ts';
import type { Dashboard } from './dashboard-store.ts';

/** What a link shows: the dashboard as it was when published (later edits do not reach its page). */
export type DashboardSnapshot = Pick<Dashboard, 'id' | 'org_id' | 'project_id' | 'name' | 'description' | 'filters' | 'cards' | 'created_by' | 'created_at' | 'updated_at'>;

/** A share link of a published dashboard as answered (never its token, shown once at publishing). */
export interface DashboardLink {
  id: number;
  dashboard_id: number;
  published_by: number;
  created_at: string;
  expires_at: string;
  revoked_at: string | null;
  state: 'active' | 'expired' | 'revoked';
}

/** A live link found by its token: what a page is rendered for, and whose rights read its data. */
export interface LiveLink {
  id: number;
  org_id: number;
  dashboard_id: number;
  publisher: StoredActor;
  expires_at: string;
  snapshot: DashboardSnapshot;
}

type LinkRow = Omit<DashboardLink, 'state'> & { org_id: number; nonce: string; revoked_by: number | null; published_scopes: unknown; snapshot: unknown };

/** What a link is answered with (never its nonce, scopes or snapshot). */
const LINK_COLUMNS = ['id', 'dashboard_id', 'published_by', 'created_at', 'expires_at', 'revoked_at'] as const;

/** Tokens look like `<link id>.<nonce>.<signature>`: a token of another shape is no link at all. */
const TOKEN = /^([1-9][0-9]{0,15})\.([A-Za-z0-9_-]{22})\.([0-9a-f]{64})$/;

/**
 * Share links of published dashboards. A token is signed with the platform's keyed HMAC (the key
 * of personal access tokens, which no plugin holds), so it cannot be forged or altered; the link
 * row makes it revocable and bounded in time.
 */
export class LinkStore {
  constructor(
    private readonly storage: Storage,
    private readonly hmac: (text: string) => string,
  ) {}

  private signature(id: number, nonce: string): string {
    return this.hmac(`dashboards.link:${id}.${nonce}`);
  }

  /** A new link of the dashboard as it is now, in `trx`: answered with its token (the only time it is). */
  async create(trx: Kysely<any>, dashboard: DashboardSnapshot, publisher: StoredActor, expiresAt: string): Promise<{ link: DashboardLink; token: string }> {
    const nonce = crypto.randomBytes(16).toString('base64url');
    const { storage } = this;
    const row = (await trx
      .insertInto('dashboards_links')
      .values({
        org_id: dashboard.org_id,
        dashboard_id: dashboard.id,
        nonce,
        published_by: publisher.userId,
        published_scopes: publisher.scopes === null ? null : storage.encodeJson(publisher.scopes),
        snapshot: storage.encodeJson(dashboard),
        created_at: storage.now(),
        expires_at: expiresAt,
      })
      .returning(LINK_COLUMNS)
      .executeTakeFirstOrThrow()) as LinkRow;
    return { link: this.answer(row), token: `${row.id}.${nonce}.${this.signature(row.id, nonce)}` };
  }

  async list(orgId: number, dashboardId: number): Promise<DashboardLink[]> {
    const rows = (await this.storage.db.selectFrom('dashboards_links').select(LINK_COLUMNS).where('org_id', '=', orgId).where('dashboard_id', '=', dashboardId).orderBy('id').execute()) as LinkRow[];
    return rows.map((row) => this.answer(row));
  }

  /** Revokes the dashboard's live links (one, or all); answers how many were live. */
  async revoke(orgId: number, dashboardId: number, userId: number, linkId?: number): Promise<number> {
    const now = this.storage.now();
    let query = this.storage.db.updateTable('dashboards_links').set({ revoked_at: now, revoked_by: userId }).where('org_id', '=', orgId).where('dashboard_id', '=', dashboardId).where('revoked_at', 'is', null).where('expires_at', '>', now);
    if (linkId !== undefined) query = query.where('id', '=', linkId);
    return Number((await query.executeTakeFirst()).numUpdatedRows);
  }

  /** The link a token names when its signature holds and it is neither revoked nor expired; else null. */
  async live(token: string): Promise<LiveLink | null> {
    const match = TOKEN.exec(token);
    if (!match) return null;
    const id = Number(match[1]);
    // Both are 64 hex digits (the pattern says so of the token's): a timing-safe compare of equal lengths.
    const expected = Buffer.from(this.signature(id, match[2]));
    if (!crypto.timingSafeEqual(expected, Buffer.from(match[3]))) return null;
    const row = (await this.storage.db
      .selectFrom('dashboards_links')
      .select(['id', 'org_id', 'dashboard_id', 'published_by', 'published_scopes', 'expires_at', 'nonce', 'snapshot'])
      .where('id', '=', id)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', this.storage.now())
      .executeTakeFirst()) as (Omit<LinkRow, 'published_scopes'> & { published_scopes: unknown }) | undefined;
    if (!row || row.nonce !== match[2]) return null;
    const scopes = row.published_scopes === null ? null : this.storage.decodeJson<string[]>(row.published_scopes);
    return { id: row.id, org_id: row.org_id, dashboard_id: row.dashboard_id, expires_at: row.expires_at, publisher: { userId: row.published_by, scopes }, snapshot: this.storage.decodeJson<DashboardSnapshot>(row.snapshot) };
  }

  /** The dashboards of the organization with a live link: each with when it was first published, by whom. */
  async published(orgId: number): Promise<{ id: number; name: string; project_id: number; published_by: number; published_at: string }[]> {
    const rows = await this.storage.db
      .selectFrom('dashboards_links as l')
      .innerJoin('dashboards as d', 'd.id', 'l.dashboard_id')
      .select(['d.id', 'd.name', 'd.project_id', 'l.published_by', 'l.created_at'])
      .where('l.org_id', '=', orgId)
      .where('l.revoked_at', 'is', null)
      .where('l.expires_at', '>', this.storage.now())
      .orderBy('l.id')
      .execute();
    const first = new Map<number, { id: number; name: string; project_id: number; published_by: number; published_at: string }>();
    for (const row of rows) if (!first.has(row.id)) first.set(row.id, { id: row.id, name: row.name, project_id: row.project_id, published_by: row.published_by, published_at: row.created_at });
    return [...first.values()];
  }

  private answer(row: Pick<LinkRow, (typeof LINK_COLUMNS)[number]>): DashboardLink {
    const state = row.revoked_at ? 'revoked' : row.expires_at <= this.storage.now() ? 'expired' : 'active';
    return { id: row.id, dashboard_id: row.dashboard_id, published_by: row.published_by, created_at: row.created_at, expires_at: row.expires_at, revoked_at: row.revoked_at, state };
  }
}
